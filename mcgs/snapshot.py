"""A run as its storage holds it, read without an engine: what ``mcgs status`` shows.

:func:`load_run` opens a run's storage read-only, reads the run record, its nodes and edges and
the LLM cost ledger into a frozen :class:`RunSnapshot`, and closes the storage. It starts no
engine: it writes nothing into the run folder, copies no input, loads no labels, builds no coder
and runs no sandbox trial, so it works on a live run, a finished one, a run on a read-only mount
and a run whose task folder is gone (Optuna's ``FrozenTrial`` is the model: a record, not a
handle).

The snapshot reports what the engine decided and stored; it recomputes nothing. The chosen node
is the one the engine stored as the run's choice after its latest verdict
(:attr:`RunSnapshot.chosen_node`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
from pathlib import Path

from mcgs.direction import best_first, better
from mcgs.node import FrozenEdge, FrozenNode, Operator, RunStatus
from mcgs.run_folder import locate_run, safe_url
from mcgs.settings import SearchSettings
from mcgs.storage import LLMCall, RunRecord, Storage
from mcgs.task import TaskSpec

__all__ = ["RunSnapshot", "load_run", "detailed_snapshot", "read_snapshot", "nodes_dataframe", "engine_gone", "live_elapsed"]


def engine_gone(run_dir, run) -> bool:
    """True when ``run`` is stored as running, paused or ensembling but no process holds its engine lock
    (the engine was killed, or its machine went down, before it could record ``stopped``);
    False when it is alive, or for a run that predates the lock (:mod:`mcgs.engine_lock`)."""
    from mcgs.engine_lock import engine_holder, has_lock_file

    return RunStatus(run.status).is_live() and has_lock_file(run_dir) and engine_holder(run_dir) is None


def live_elapsed(run, gone: bool = False) -> float:
    """Seconds of budget spent: the stored figure, plus the time since the run's last write when
    it is running (the engine stores its clock after every node) and its engine is not ``gone``."""
    if run.status not in (RunStatus.RUNNING, RunStatus.ENSEMBLING) or run.updated_at is None or gone:
        return run.elapsed_s
    now = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
    return run.elapsed_s + max(0.0, (now - run.updated_at).total_seconds())


@dataclasses.dataclass(frozen=True)
class RunSnapshot:
    """One run at one moment, as stored.

    Attributes:
        run_dir: The run directory.
        record: The run's row (status, spend in seconds, the chosen node's id, settings).
        task: The task, as the run recorded it (metric and its direction fixed there).
        settings: The run's stored settings.
        nodes: Every node in creation order, the root (seq 0) first. Without ``details`` their
            ``code``, ``stdout_tail`` and ``stderr_tail`` are empty strings.
        edges: Every typed edge in creation order.
        llm_calls: The cost ledger in call order.
        engine_gone: The run is stored as running (or paused, ensembling) but no process holds
            its engine lock: the engine was killed before it could record a stop.
        details: Whether the nodes carry their programs and output tails.
        storage_url: Where the run is stored (password hidden).
    """

    run_dir: Path
    record: RunRecord
    task: TaskSpec
    settings: SearchSettings
    nodes: tuple[FrozenNode, ...]
    edges: tuple[FrozenEdge, ...]
    llm_calls: tuple[LLMCall, ...]
    engine_gone: bool
    details: bool = False
    storage_url: str = ""

    @property
    def run_id(self) -> int:
        return self.record.id

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def status(self) -> str:
        """The stored status (``created``, ``running``, ``paused``, ``ensembling``,
        ``stopped``, ``finished``); see :attr:`engine_gone` for a run whose engine died."""
        return self.record.status

    @functools.cached_property
    def by_id(self) -> dict[int, FrozenNode]:
        """The nodes by storage id."""
        return {n.id: n for n in self.nodes}

    @property
    def search_nodes(self) -> list[FrozenNode]:
        """The nodes without the root."""
        return [n for n in self.nodes if n.parent_id is not None]

    @property
    def chosen_node(self) -> FrozenNode | None:
        """The node the run hands in, as the engine stored it after its latest verdict (the
        best single node or an ensemble: :attr:`mcgs.search.Search.final_node`); None before
        any valid node."""
        return self.by_id.get(self.record.best_node_id) if self.record.best_node_id is not None else None

    @property
    def input_dir(self) -> Path:
        """The run's copy of its task (``RUN_DIR/input``), what every candidate read."""
        return self.run_dir / "input"

    def node_dir(self, node: FrozenNode) -> Path:
        """The workspace of ``node``: ``RUN_DIR/nodes/<seq, five digits>``."""
        return self.run_dir / "nodes" / f"{node.seq:05d}"

    @property
    def max_output_bytes(self) -> int:
        """Cap on one file read or copied out of a workspace, bytes (setting ``max_output_mb``)."""
        return int(self.settings.max_output_mb * 2**20)

    def sandbox_limits(self, timeout_s: float, threads: int | None = None):
        """The limits a run of this run's node code gets now (export's measurements), as the
        search gives them (:meth:`mcgs.search.Search.sandbox_limits`): ``timeout_s`` (at least
        1 s), the memory limit, the disk cap, the threads and the run's isolation, checked to
        work here.

        Raises:
            mcgs.run_folder.RunError: the run's isolation needs bubblewrap, which is missing or
                cannot create namespaces here.
        """
        from mcgs.disk import workspace_cap_mb
        from mcgs.run_folder import RunError
        from mcgs.sandbox import SandboxLimits, resolve_isolation

        try:
            isolation = resolve_isolation(self.settings.sandbox.isolation)
        except ValueError as exc:
            raise RunError(str(exc)) from exc
        return SandboxLimits.for_run(self.settings, timeout_s, isolation=isolation, disk_mb=workspace_cap_mb(self.run_dir, self.settings),
                                     threads=threads)

    @property
    def best_node(self) -> FrozenNode | None:
        """The full-fidelity valid node with the best score in the task's direction, ensembles included (the
        earliest on a tie; :func:`mcgs.graph.best_node`), or None."""
        best = None
        for n in self.nodes:
            if n.is_valid and n.full_fidelity and (best is None or better(n.score, best.score, self.task.higher_is_better)):
                best = n
        return best

    @property
    def best_single_node(self) -> FrozenNode | None:
        """The full-fidelity valid non-ensemble node with the best score in the task's direction (the
        earliest on a tie), or None."""
        singles = [n for n in self.nodes if n.is_valid and n.full_fidelity and n.operator is not Operator.ENSEMBLE]
        if not singles:
            return None
        return min(singles, key=lambda n: (best_first(n.score, self.task.higher_is_better), n.seq))

    @property
    def spent_s(self) -> float:
        """Seconds of the time budget spent: the stored figure, plus the time since the run's
        last write while its engine is alive and searching (:func:`live_elapsed`)."""
        return live_elapsed(self.record, self.engine_gone)


def read_snapshot(storage: Storage, run_dir: str | Path, name: str, details: bool = False) -> RunSnapshot:
    """Read the run named ``name`` from an open ``storage`` into a :class:`RunSnapshot`.

    Args:
        storage: The run's storage (left open).
        run_dir: The run directory (for the engine lock and node folders).
        name: The run's name in that storage.
        details: Read every node's program and output tails too.

    Raises:
        mcgs.storage.StorageError: no run of that name.
    """
    run_dir = Path(run_dir)
    record = storage.get_run(name)
    nodes = storage.get_nodes(record.id) if details else storage.get_node_summaries(record.id)
    return RunSnapshot(
        run_dir=run_dir,
        record=record,
        task=TaskSpec.from_json(record.task_json),
        settings=SearchSettings(**record.settings),
        nodes=tuple(nodes),
        edges=tuple(storage.get_edges(record.id)),
        llm_calls=tuple(storage.llm_calls(record.id)),
        engine_gone=engine_gone(run_dir, record),
        details=details,
        storage_url=safe_url(storage.url),
    )


def detailed_snapshot(run, error: type[Exception] = ValueError) -> RunSnapshot:
    """``run`` as a snapshot whose nodes carry their programs and logs: a :class:`RunSnapshot`
    read with ``details``, or a live :class:`~mcgs.search.Search`'s, read from its storage now
    and under its settings now.

    Raises:
        error: a snapshot read without ``details`` (``load_run(..., details=True)`` is needed).
    """
    if hasattr(run, "snapshot"):
        return dataclasses.replace(run.snapshot(details=True), settings=run.settings)
    if not run.details:
        raise error("this needs the nodes' programs and logs: load the run with load_run(..., details=True)")
    return run


def load_run(run_dir: str | Path, *, storage: str | None = None, name: str | None = None, details: bool = False) -> RunSnapshot:
    """Read a run without starting an engine (``mcgs status``).

    Args:
        run_dir: The run directory.
        storage: Storage URL; default the run's own (``RUN_DIR/storage.json`` or
            ``RUN_DIR/mcgs.db``).
        name: The run's name in that storage; default the only run there.
        details: Read every node's program and output tails too.

    Returns:
        The snapshot; the storage is closed again.

    Raises:
        mcgs.run_folder.RunError: no run there (:func:`mcgs.run_folder.locate_run`).
        mcgs.storage.StorageError: a storage written by another schema version.
    """
    store, record = locate_run(run_dir, storage=storage, name=name, read_only=True)
    try:
        return read_snapshot(store, run_dir, record.name, details=details)
    finally:
        store.close()


def nodes_dataframe(nodes):
    """Nodes as a pandas DataFrame, one row per node in creation order (the root excluded), like
    Optuna's ``trials_dataframe``.

    Columns: ``seq`` (node number), ``id``, ``parent_seq``, ``operator``, ``state``, ``score``
    (engine CV score in the task metric; NaN unless valid), ``fidelity`` (share of the training
    rows the node saw; scores compare within one fidelity), ``reward``, ``runtime_s``, ``depth``,
    ``attempts``, ``owner``, ``plan``, ``error``, ``knowledge_ids`` (comma-separated),
    ``created_at``, ``finished_at`` (UTC).
    """
    import pandas as pd

    seq_of = {n.id: n.seq for n in nodes}
    rows = [
        {
            "seq": n.seq, "id": n.id, "parent_seq": seq_of.get(n.parent_id), "operator": n.operator.value, "state": n.state.value,
            "score": n.score, "fidelity": n.fidelity, "reward": n.reward, "runtime_s": n.runtime_s, "depth": n.depth, "attempts": n.attempts,
            "owner": n.owner, "plan": n.plan, "error": n.error, "knowledge_ids": ",".join(n.knowledge_ids),
            "created_at": n.created_at, "finished_at": n.finished_at,
        }
        for n in nodes
        if n.parent_id is not None
    ]
    columns = ["seq", "id", "parent_seq", "operator", "state", "score", "fidelity", "reward", "runtime_s", "depth", "attempts",
               "owner", "plan", "error", "knowledge_ids", "created_at", "finished_at"]
    df = pd.DataFrame(rows, columns=columns)
    df["score"] = df["score"].astype(float)
    df["parent_seq"] = df["parent_seq"].astype("Int64")
    return df
