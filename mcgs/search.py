"""The search loop: select -> code -> run -> evaluate -> persist -> backpropagate.

:class:`Search` drives one run stored in ``RUN_DIR`` (``mcgs.db`` + ``nodes/<seq>/``
workspaces + ``best/``). It holds no algorithm of its own: selection and reward live in
:mod:`mcgs.policy`, requests in :mod:`mcgs.operators`, programs in the coder, execution in
:mod:`mcgs.sandbox`, scoring in :mod:`mcgs.evaluation`. Everything is written to storage as it
happens, so a run stopped for any reason resumes with :func:`mcgs.load_search` (:func:`open_search` here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import random
import shutil
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

from mcgs.candidate_files import CandidateFileError, candidate_file_exists, copy_candidate_file, remove_tree
from mcgs.coders import Coder, CoderAnswer, CoderStop
from mcgs.contract import OOF_PATH, SUBMISSION_PATH, TEST_PRED_PATH, prepare_run_input, prepare_workspace
from mcgs.evaluation import OutputError, TaskLabels, evaluate_workspace
from mcgs.graph import best_node, build_graph, newest_node, update_graph, valid_nodes
from mcgs.node import EdgeKind, FrozenNode, NodeState, Operator
from mcgs.policy import compute_reward, select_expansion
from mcgs.profile import profile_task
from mcgs.run_folder import (
    BASELINE_NAME,
    DB_NAME,
    FULL_DISK_MIN_MB,
    FULL_DISK_RESUME_MB,
    DISK_POLL_S,
    LIVE_SETTINGS,
    OVERRIDES_NAME,
    STORAGE_NAME,
    RunError,
    check_run_folder,
    default_storage_url,
    locate_run,
    open_storage,
    safe_url,
)
from mcgs.sandbox import Outcome, SandboxLimits, run_program
from mcgs.settings import SearchSettings
from mcgs.storage import ClaimLost, RunRecord, Storage, owner_id
from mcgs.task import TaskError, TaskSpec, data_fingerprint, load_task

__all__ = ["Search", "create_search", "open_search", "RunError", "DB_NAME"]

logger = logging.getLogger(__name__)

LOST_SAID_MAX = 5  # nodes with lost artifacts named one by one (final_node)
# Below this many seconds of remaining budget no new candidate is started.
MIN_CANDIDATE_S = 5.0
_PACKAGES = ("mcgs", "numpy", "pandas", "scikit-learn", "lightgbm", "catboost", "sqlalchemy", "networkx", "anthropic")
Callback = Callable[["Search", FrozenNode], None]


_OUTCOME_STATE = {
    Outcome.OK: NodeState.VALID,
    Outcome.BUGGY: NodeState.BUGGY,
    Outcome.TIMEOUT: NodeState.TIMEOUT,
    Outcome.OOM: NodeState.OOM,
    Outcome.DISK: NodeState.DISK,
    Outcome.PROCESS_LIMIT: NodeState.PROCESS_LIMIT,
    Outcome.INVALID_OUTPUT: NodeState.INVALID_OUTPUT,
}


def _package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _atomic_write(dst: Path, data: bytes) -> None:
    """Write ``data`` to ``dst`` through a temp file, fsync and rename (mode 644)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, dst)


@dataclasses.dataclass
class _Clock:
    """Wall-clock budget accounting across sittings (``elapsed_before`` from storage)."""

    budget_s: float
    elapsed_before: float
    started: float = dataclasses.field(default_factory=time.monotonic)
    paused_s: float = 0.0  # time spent paused (low disk space) in this sitting: not charged

    @property
    def elapsed(self) -> float:
        return self.elapsed_before + (time.monotonic() - self.started) - self.paused_s

    @property
    def remaining(self) -> float:
        return max(0.0, self.budget_s - self.elapsed)

    @property
    def progress(self) -> float:
        return min(1.0, self.elapsed / self.budget_s)


class Search:
    """One search run over a task, persisted in ``run_dir``.

    Use :func:`mcgs.create_search` or :func:`mcgs.load_search` rather than the constructor.

    Args:
        run_dir: The run directory.
        storage: Its storage.
        run: The run record.
        task: The task.
        settings: Search settings (budgets and constants).
        coder: Who writes the programs.
        callbacks: Called as ``callback(search, node)`` after each node finishes (a single
            function is taken as a list of one). An exception a callback raises stops the run
            like Ctrl-C would (status ``stopped``, every finished node kept; ``run`` again
            resumes it) and propagates to the caller of :meth:`run`.
        read_only: Only read the run (status, report, export): nothing is written to its folder
            or storage, no trial sandbox runs, and the task's own data folder is not needed
            (labels come from the run's ``input/`` copy).
    """

    def __init__(
        self,
        run_dir: Path,
        storage: Storage,
        run: RunRecord,
        task: TaskSpec,
        settings: SearchSettings,
        coder: Coder,
        callbacks: Sequence[Callback] = (),
        read_only: bool = False,
    ):
        self.run_dir = run_dir
        self.storage = storage
        self.run_record = run
        self.task = task
        self.settings = settings
        self.coder = coder
        self.read_only = read_only
        self.callbacks = [callbacks] if callable(callbacks) else list(callbacks)
        if read_only:
            self.input_dir = run_dir / "input"
            if not (self.input_dir / "task.json").is_file():
                raise RunError(f"{self.input_dir} is missing or incomplete: the run's copy of its task is gone; restore it from a copy of the run")
        else:
            self.input_dir = prepare_run_input(task, run_dir)
        self.profile = self._load_profile()
        self._labels: TaskLabels | None = None
        self._rng = random.Random(f"mcgs-{settings.seed}-{run.id}")
        self.clock = _Clock(settings.time_budget_s, run.elapsed_s)
        self.stop_reason: str | None = None
        self._stop = threading.Event()
        self._ensemble_checked = 0  # valid search nodes when ensemble selection last ran
        self._ensemble_select_s = 0.0  # seconds spent selecting ensembles during the search (this sitting)
        self._plan_queue: list = []  # screened draft plans, best first (multi-plan drafting)
        self.say: Callable[[str], None] = logger.info  # one-line messages for the user (the CLI prints them)
        self._verdict_lock = threading.RLock()
        self._coder_stop: str | None = None  # set when the coder asks the run to stop (LLM budget)
        self._lost_said: set[int] = set()  # nodes whose lost artifacts were reported (final_node)
        self.owner = owner_id()  # this process, as the holder of node claims
        self.is_worker = False  # True while :meth:`work` runs: no run-level writes (status, export)
        self._view = None  # storage.RunView of this run (nodes()), created on first use
        self._graph_local = threading.local()  # each thread's graph and how far it is up to date (graph())
        self._full_lock = threading.Lock()  # one pause at a time for a full disk (_wait_for_space)
        self._full_retries = 0  # writes that failed for a full disk while it had room (_wait_for_space)
        self._isolation: str | None = None
        if read_only:  # resolved when node code first runs (export's measurements)
            return
        self.isolation  # noqa: B018 - fail at once when the run's isolation is not available here
        storage.on_full = self._wait_for_space
        if hasattr(coder, "attach"):  # the LLM coder writes its calls to this run's ledger
            coder.attach(storage, run.id, lambda: self.clock.remaining)

    @property
    def isolation(self) -> str:
        """The isolation candidates run with: the run's stored level, checked to work here
        (:func:`mcgs.sandbox.resolve_isolation`).

        Raises:
            RunError: it needs bubblewrap, which is missing or cannot create namespaces here.
        """
        if self._isolation is None:
            from mcgs.sandbox import resolve_isolation

            try:  # a resumed run keeps the level it recorded
                self._isolation = resolve_isolation(self.settings.isolation)
            except ValueError as exc:
                raise RunError(str(exc)) from exc
        return self._isolation

    @property
    def labels(self) -> TaskLabels:
        """The labels, folds and sample submission the engine scores with, read once from the
        run's ``input/`` copy of the task (what every candidate reads)."""
        if self._labels is None:
            inp = self.task.model_copy(update={"data_dir": self.input_dir})
            self._labels = TaskLabels.load(inp, self.input_dir / "folds.csv")
        return self._labels

    @property
    def stop_requested(self) -> bool:
        """True once :meth:`request_stop` was called."""
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Ask a running search to stop (thread- and signal-safe): the running candidate is
        killed and recorded INTERRUPTED, and :meth:`run` raises KeyboardInterrupt."""
        self._stop.set()

    # ------------------------------------------------------------------ views

    @property
    def run_id(self) -> int:
        return self.run_record.id

    def nodes(self) -> list[FrozenNode]:
        """All nodes of the run, in creation order, as storage holds them now (read
        incrementally: :class:`~mcgs.storage.RunView`)."""
        return self._run_view().nodes()

    def graph(self):
        """The search graph built from storage alone (the nodes and edges storage holds now).

        Each thread keeps its own graph (worker threads select while others add nodes) and
        brings it up to date in place with what storage added or changed since its last call
        (:func:`mcgs.graph.update_graph`), so a step costs in proportion to the change, not to
        the graph's size; it is built whole on the first call and after the storage view read
        everything again. Callers must not modify it, and should not hold it across a call that
        may change storage if they need the older state."""
        view = self._run_view()
        with view.lock:
            view.refresh()
            cached = getattr(self._graph_local, "entry", None)
            if cached is not None and cached["view"] is view and cached["epoch"] == view.epoch:
                if cached["version"] == view.version:
                    return cached["graph"]
                nodes, edges = view.changes_since(cached["version"], cached["n_edges"])
                pending = update_graph(cached["graph"], nodes, cached["pending"] + edges)
                if pending is not None:
                    cached.update(version=view.version, n_edges=view.edge_count, pending=pending)
                    return cached["graph"]
            nodes = view.nodes()
            ids = {n.id for n in nodes}
            edges = view.edges()
            # an edge whose node committed after the nodes were read waits for the next refresh
            g = build_graph(nodes, [e for e in edges if e.src in ids and e.dst in ids])
            pending = [e for e in edges if e.src not in ids or e.dst not in ids]
            self._graph_local.entry = {"view": view, "epoch": view.epoch, "version": view.version, "n_edges": view.edge_count,
                                       "pending": pending, "graph": g}
            return g

    def _run_view(self):
        view = self._view
        if view is None or view.storage is not self.storage or view.run_id != self.run_id:
            view = self._view = self.storage.run_view(self.run_id)
        return view

    def nodes_dataframe(self):
        """The run's nodes as a pandas DataFrame, one row per node in creation order (the root
        excluded), like Optuna's ``trials_dataframe``.

        Columns: ``seq`` (node number), ``id``, ``parent_seq``, ``operator``, ``state``,
        ``score`` (engine CV score in the task metric; NaN unless valid), ``reward``,
        ``runtime_s``, ``depth``, ``attempts``, ``owner``, ``plan``, ``error``,
        ``knowledge_ids`` (comma-separated), ``created_at``, ``finished_at`` (UTC).
        """
        import pandas as pd

        nodes = self.nodes()
        seq_of = {n.id: n.seq for n in nodes}
        rows = [
            {
                "seq": n.seq, "id": n.id, "parent_seq": seq_of.get(n.parent_id), "operator": n.operator.value, "state": n.state.value,
                "score": n.score, "reward": n.reward, "runtime_s": n.runtime_s, "depth": n.depth, "attempts": n.attempts,
                "owner": n.owner, "plan": n.plan, "error": n.error, "knowledge_ids": ",".join(n.knowledge_ids),
                "created_at": n.created_at, "finished_at": n.finished_at,
            }
            for n in nodes
            if n.parent_id is not None
        ]
        columns = ["seq", "id", "parent_seq", "operator", "state", "score", "reward", "runtime_s", "depth", "attempts",
                   "owner", "plan", "error", "knowledge_ids", "created_at", "finished_at"]
        df = pd.DataFrame(rows, columns=columns)
        df["score"] = df["score"].astype(float)
        df["parent_seq"] = df["parent_seq"].astype("Int64")
        return df

    def snapshot(self, details: bool = False):
        """The run as its storage holds it now, frozen (:class:`mcgs.snapshot.RunSnapshot`).

        Args:
            details: Read every node's program and output tails too.
        """
        from mcgs.snapshot import read_snapshot

        return read_snapshot(self.storage, self.run_dir, self.run_record.name, details=details)

    @property
    def best_node(self) -> FrozenNode | None:
        """The valid node with the best engine score (task direction), or None."""
        return best_node(self.graph(), self.task.higher_is_better)

    def node_dir(self, node: FrozenNode) -> Path:
        return self.run_dir / "nodes" / f"{node.seq:05d}"

    # ------------------------------------------------------------------ loop

    def run(self, time_budget: str | float | None = None, workers: int | None = None, max_nodes: int | None = None) -> FrozenNode | None:
        """Search until the time or node budget is spent, then build the final ensemble.

        Args:
            time_budget: The run's total wall budget (seconds, or ``"10m"``, ``"2h"``); default
                the stored one. Time already spent counts against it.
            workers: Candidates to run at once in this process; default the stored setting.
            max_nodes: Stop searching after this many finished nodes (the final ensemble, built
                after them, is not counted); default the stored setting.
            (Given values are stored with the run, so a later resume keeps them.)

        Returns:
            The final node (see :attr:`final_node`), or None when no valid node was found.

        Raises:
            KeyboardInterrupt: after recording the running candidate as INTERRUPTED and the
                run as ``stopped`` (resume with :func:`mcgs.load_search`).
            ValueError: a budget or worker count that is not positive.
            RunError: another live process is searching this run (one engine per run folder,
                :mod:`mcgs.engine_lock`); nothing is changed.
        """
        from mcgs.engine_lock import EngineBusy, acquire

        try:
            lock = acquire(self.run_dir)
        except EngineBusy as exc:
            raise RunError(str(exc)) from None
        try:
            return self._run_locked(time_budget, workers, max_nodes)
        finally:
            lock.close()

    def _run_locked(self, time_budget, workers, max_nodes) -> FrozenNode | None:
        from mcgs.sandbox import kill_candidates
        from mcgs.settings import parse_duration

        changes: dict[str, Any] = {}
        if time_budget is not None:
            changes["time_budget_s"] = parse_duration(time_budget)
        if workers is not None:
            changes["workers"] = workers
        if max_nodes is not None:
            changes["max_nodes"] = max_nodes
        if changes:
            self.settings = SearchSettings(**{**self.settings.model_dump(), **changes})
            self.clock.budget_s = self.settings.time_budget_s
        # stored every time: a budget given to load_search (mcgs resume --time-budget) too
        self.storage.update_run(self.run_id, settings_json=json.dumps(self.settings.model_dump(mode="json"), default=str))

        for warning in self._oversubscription():  # said once: the CLI prints say(), a library caller logs it
            (logger.warning if self.say == logger.info else self.say)(f"warning: {warning}")
        for note in self.task.notes:  # what the task loader inferred (a target, say)
            self.say(f"note: {note}")
        train_only = list(self.profile.get("train_only_columns", ()))
        if train_only:
            shown = ", ".join(repr(c) for c in train_only[:8]) + (f" and {len(train_only) - 8} more" if len(train_only) > 8 else "")
            self.say(f"note: {len(train_only)} column(s) of the training file are not in the test file and are never features: {shown}")
        orphans = kill_candidates(self.run_dir, orphans_only=True)  # left by an engine that was killed (SIGKILL)
        if orphans:
            logger.warning("killed %d candidate process(es) left running by a previous engine", orphans)
        self._requeue_lost()
        again = self._retry_interrupted()
        if again:
            self.say(f"{len(again)} node(s) interrupted earlier are queued again (the same program, no new coder call)")
        self.storage.update_run(self.run_id, status="running")
        logger.info("run %s: budget %.0f s, %.0f s already spent", self.run_record.name, self.clock.budget_s, self.clock.elapsed_before)
        if self.clock.remaining < MIN_CANDIDATE_S:
            self.say(f"the time budget of {self.clock.budget_s:.0f} s is spent ({self.clock.elapsed_before:.0f} s used): no new candidate; "
                     f"give a larger total budget to search on (mcgs resume RUN_DIR --time-budget, or run(time_budget=...))")
        try:
            with self._heartbeat(clock=True):
                self._search_loop()
            if self.settings.ensemble and not self._final_ensemble_is_current():
                self.storage.update_run(self.run_id, status="ensembling")  # `mcgs worker`s start no new node
                self.build_ensemble()
        except BaseException:
            from mcgs.storage import StorageError

            try:
                self.storage.interrupt_unfinished(self.run_id, owner=self.owner)
                self._save_progress(status="stopped")
            except StorageError as exc:  # a full disk, say: the lock's release tells status the engine is gone
                logger.warning("could not record the stop: %s", exc)
            raise
        final = self.final_node
        if final is not None:
            self.export_best(final)
        self._save_progress(status="finished")
        return final

    def _final_ensemble_is_current(self) -> bool:
        """Whether the newest node is a finished final ensemble: a resume that ran no new node
        (its budget already spent) would otherwise add the same ensemble again."""
        from mcgs.ensemble import FINAL_ENSEMBLE_TAG

        newest = max(self.nodes(), key=lambda n: n.seq)
        return (newest.operator is Operator.ENSEMBLE and newest.plan.startswith(FINAL_ENSEMBLE_TAG)
                and newest.state not in (NodeState.PENDING, NodeState.RUNNING, NodeState.INTERRUPTED))

    def _oversubscription(self) -> list[str]:
        """Why candidates would compete for cores (each gets ``max(1, cpu_threads // workers)``
        threads): more workers than ``cpu_threads``, or more threads than this machine has. The
        run goes on; a candidate slowed by the contention may hit its time limit."""
        s, cores = self.settings, os.cpu_count() or 1
        out = []
        if s.workers > s.cpu_threads:
            out.append(f"{s.workers} workers with {s.cpu_threads} CPU thread(s) in all: each candidate still gets one thread, so "
                       f"{s.workers} candidates share {s.cpu_threads} and may time out; give at most as many workers as "
                       f"CPU threads (--workers, --cpu-threads)")
        if s.cpu_threads > cores:
            out.append(f"{s.cpu_threads} CPU threads asked for on a machine with {cores} core(s): candidates will compete for "
                       f"the cores and may time out; give at most {cores} (--cpu-threads)")
        return out

    def work(self, drain: bool = False) -> int:
        """Take part in a run as one more worker (``mcgs worker``): claim queued nodes and, unless
        ``drain``, select and write new ones, until the run finishes, its engine builds the final
        ensemble (status ``ensembling``) or the budget (the engine's clock) or node budget is spent.

        Workers may run in other processes or on other machines sharing the storage (PostgreSQL)
        and the artifacts folder. A worker records node verdicts only: the run's status, clock,
        final ensemble and ``best/`` belong to the process that runs :meth:`run`.

        Args:
            drain: Only run queued nodes; return when none is left.

        Returns:
            How many nodes this worker finished.

        Raises:
            KeyboardInterrupt: after recording this worker's running node INTERRUPTED.
        """
        from mcgs.status_view import live_elapsed

        self.is_worker = True
        self._requeue_lost()
        done = 0
        try:
            with self._heartbeat():
                while not self._stop.is_set():
                    run = self.storage.get_run(self.run_record.name)
                    if run.status in ("finished", "ensembling"):
                        break
                    if run.status == "running":  # the engine's clock: the elapsed time stored at
                        # its last write (when this worker joined) lags it by up to a node
                        self.clock.elapsed_before, self.clock.started, self.clock.paused_s = live_elapsed(run), time.monotonic(), 0.0
                    if self._budget_exhausted():
                        break
                    if drain:
                        node = self.storage.claim_node(self.run_id, self.owner, self.settings.lease_s)
                        if node is None:
                            break
                        launched = (node, self._node_timeout(), self._node_seed(node))
                    else:
                        try:
                            launched = self._launch()
                        except CoderStop:
                            break
                        if launched is None:
                            continue
                    self.say(f"worker {self.owner}: running node {launched[0].seq} (attempt {launched[0].attempts})")
                    self._execute(*launched)
                    done += 1
                if self._stop.is_set():
                    raise KeyboardInterrupt("stop requested")
        except BaseException:
            self.storage.interrupt_unfinished(self.run_id, owner=self.owner)
            raise
        return done

    def _retry_interrupted(self) -> list[FrozenNode]:
        """Queue a copy of every INTERRUPTED node not tried again yet: a node cut short by a stop
        or by the end of the budget carries no verdict, so a resumed run runs the same program
        (same parent, operator, plan, code and edges; ``config.retry_of`` names the node) instead
        of writing a new one, and the expansion is not lost (a Ctrl-C during the first LightGBM
        draft used to drop that family for the rest of the run). The interrupted node stays as
        it was: finished history is immutable. Nodes lost by ``max_attempts`` workers in a row
        are not tried again.

        Returns:
            The queued copies.
        """
        nodes = self.nodes()
        retried = {n.config.get("retry_of") for n in nodes if n.config.get("retry_of") is not None}
        todo = [n for n in nodes if n.state is NodeState.INTERRUPTED and n.seq not in retried and n.attempts < self.settings.max_attempts]
        if not todo:
            return []
        extra: dict[int, list] = {}
        for e in self.storage.get_edges(self.run_id):
            if e.kind is not EdgeKind.DERIVES:
                extra.setdefault(e.dst, []).append((e.src, e.kind, e.data))
        return [self.storage.add_node(self.run_id, parent_id=n.parent_id, operator=n.operator, plan=n.plan, code=n.code,
                                      config={**n.config, "retry_of": n.seq}, knowledge_ids=n.knowledge_ids,
                                      extra_edges=extra.get(n.id, ()), review=n.review)
                for n in todo]

    def _requeue_lost(self) -> None:
        requeued, lost = self.storage.requeue_lost(self.run_id, self.settings.max_attempts)
        if requeued:
            self.say(f"{len(requeued)} node(s) whose worker was lost are queued again")
        if lost:
            logger.warning("%d node(s) lost their worker %d times and are marked interrupted", len(lost), self.settings.max_attempts)

    @contextlib.contextmanager
    def _heartbeat(self, clock: bool = False):
        """Renew this process's leases every third of ``lease_s`` while the body runs; with
        ``clock`` (the engine, which owns the run's clock) store the time spent too, so an engine
        killed mid-candidate (SIGKILL, a lost machine) loses at most one beat of its spend
        rather than everything since its last finished node."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.settings.lease_s / 3):
                try:
                    self.storage.renew_leases(self.owner, self.settings.lease_s)
                    if clock:
                        self.storage.update_run(self.run_id, elapsed_s=self.clock.elapsed)
                except BaseException as exc:  # a missed beat is retried; the lease covers two more
                    logger.warning("heartbeat failed: %s", exc or type(exc).__name__)

        thread = threading.Thread(target=beat, name="mcgs-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)

    def _node_timeout(self) -> float:
        return min(self.settings.node_limit_s, self.clock.remaining - self._reserve_s)

    def _node_seed(self, node: FrozenNode) -> int:
        return self.settings.seed * 100_003 + node.seq

    def _search_loop(self) -> None:
        """Baseline, multi-plan screening, then expansions until a budget is spent."""
        self._run_baseline()
        self._prepare_plans()
        if self.settings.workers > 1:
            self._run_workers()
            return
        while True:
            if self._stop.is_set():
                raise KeyboardInterrupt("stop requested")
            self._wait_for_disk()
            reason = self._budget_exhausted()
            if reason:
                self.stop_reason = reason
                return
            try:
                self.step()
            except CoderStop as exc:
                self._coder_stop = str(exc)

    @property
    def _reserve_s(self) -> float:
        if not self.settings.ensemble:
            return 0.0
        return min(self.settings.ensemble_reserve_s, 0.1 * self.clock.budget_s)

    def live_setting(self, name: str):
        """A setting as it is now: ``RUN_DIR/overrides.json`` (written by ``mcgs set``) wins
        over the run's stored settings. Only :data:`LIVE_SETTINGS` can be overridden."""
        path = self.run_dir / OVERRIDES_NAME
        if name in LIVE_SETTINGS and path.is_file():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            if name in data:
                return type(getattr(self.settings, name))(data[name])
        return getattr(self.settings, name)

    def _wait_for_disk(self) -> None:
        """Pause (without charging the budget) while the run's disk has less free space than
        ``min_free_disk_mb``; resume when space is freed or the floor lowered (``mcgs set``)."""
        paused = False
        while True:
            floor = float(self.live_setting("min_free_disk_mb"))
            free = shutil.disk_usage(self.run_dir).free / 2**20
            if free >= floor:
                if paused:
                    self.storage.update_run(self.run_id, status="running")
                    self.say(f"{free:.0f} MB free, at or above the floor of {floor:.0f} MB: the run continues")
                return
            if not paused:
                paused = True
                self.storage.update_run(self.run_id, status="paused")
                self.say(
                    f"paused: {free:.0f} MB free on the disk of {self.run_dir}, below the floor of {floor:.0f} MB "
                    f"(min_free_disk_mb); free some space, or lower the floor with `mcgs set {self.run_dir} min_free_disk_mb=N`"
                )
            t0 = time.monotonic()
            stopped = self._stop.wait(DISK_POLL_S)
            self.clock.paused_s += time.monotonic() - t0
            if stopped:
                raise KeyboardInterrupt("stop requested")

    def _wait_for_space(self, full) -> None:
        """What the storage calls when a write finds the disk full (``Storage.on_full``), and the
        engine when a file it writes does: pause (not charged to the budget) until
        ``min(min_free_disk_mb, FULL_DISK_RESUME_MB)`` (at least ``FULL_DISK_MIN_MB``) are free, saying which path is full, then
        return so the write is tried again. Called from any thread; one pause at a time.

        Raises:
            KeyboardInterrupt: the run is being stopped (Ctrl-C) while it waits.
            StorageFull: the write failed again although the disk has that much free (a quota,
                or a storage limit other than the disk): waiting would not help.
        """
        with self._full_lock:
            folder = Path(full.path).parent if self.storage.is_sqlite or Path(full.path).is_absolute() else self.run_dir
            if not folder.is_dir():
                folder = self.run_dir
            need = max(FULL_DISK_MIN_MB, min(float(self.live_setting("min_free_disk_mb")), FULL_DISK_RESUME_MB))
            paused = False
            while True:
                if self._stop.is_set():
                    raise KeyboardInterrupt("stop requested")
                free = shutil.disk_usage(folder).free / 2**20
                if free >= need:
                    if paused:
                        self._full_retries = 0
                        self.say(f"{free:.0f} MB free on the disk holding {full.path}: the run continues")
                        return
                    self._full_retries += 1
                    if self._full_retries > 3:  # not the disk: waiting will not help
                        self._full_retries = 0
                        raise full
                    return
                if not paused:
                    paused = True
                    self.say(f"paused: the disk holding {full.path} is full ({free:.0f} MB free), so the engine cannot write "
                             f"there; free some space and the run continues by itself once {need:.0f} MB are free (nothing is "
                             f"lost; Ctrl-C stops it, and `mcgs resume {self.run_dir}` goes on later)")
                t0 = time.monotonic()
                self._stop.wait(DISK_POLL_S)
                self.clock.paused_s += time.monotonic() - t0

    def _with_space(self, write: Callable[[], Any], where: Path) -> Any:
        """``write()``, paused and tried again while it fails for a full disk (:meth:`_wait_for_space`)."""
        import errno

        from mcgs.storage import StorageFull

        while True:
            try:
                return write()
            except OSError as exc:
                if exc.errno != errno.ENOSPC or self.read_only:
                    raise
                self._wait_for_space(StorageFull(str(where), exc.strerror or "no space left on device"))

    def _budget_exhausted(self, in_flight: int = 0) -> str | None:
        """Why no new candidate may start (``in_flight`` candidates count against the node
        budget), or None."""
        if self._coder_stop:
            return self._coder_stop
        if self.clock.remaining - self._reserve_s < MIN_CANDIDATE_S:
            return "time budget spent"
        if self.settings.max_nodes is not None:
            nodes = [n for n in self.nodes() if n.operator not in (Operator.ROOT, Operator.ENSEMBLE)]
            done = sum(1 for n in nodes if n.state.is_finished())
            # claimed by any process (this one's workers, `mcgs worker`s): they will finish too
            claimed = sum(1 for n in nodes if n.state is NodeState.RUNNING or (n.state is NodeState.PENDING and n.owner))
            if done + max(in_flight, claimed) >= self.settings.max_nodes:
                return "node budget spent"
        return None

    def _run_workers(self) -> None:
        """Keep ``settings.workers`` candidates running at once (DESIGN §7).

        Only this thread selects and writes programs; worker threads each drive one sandbox
        process with ``cpu_threads // workers`` threads. A launched node is stored PENDING at
        once, so the next selection sees it as an in-flight visit with the virtual loss and
        goes elsewhere. Coordination is through the storage (SQLite in WAL mode).
        """
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        workers = self.settings.workers
        in_flight: dict = {}
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mcgs-worker")
        try:
            while True:
                if self._stop.is_set():
                    raise KeyboardInterrupt("stop requested")
                while len(in_flight) < workers:
                    self._wait_for_disk()
                    reason = self._budget_exhausted(in_flight=len(in_flight))
                    if reason:
                        self.stop_reason = reason
                        break
                    try:
                        launched = self._launch()
                    except CoderStop as exc:
                        self._coder_stop = str(exc)
                        continue
                    if launched is None:
                        continue  # finished without running (rejected, or an ensemble built inline)
                    node, timeout, seed = launched
                    in_flight[pool.submit(self._execute, node, timeout, seed)] = node
                if not in_flight:
                    break
                done, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in done:
                    in_flight.pop(fut)
                    fut.result()  # re-raise a worker's error (or its KeyboardInterrupt on stop)
        except BaseException:
            self._stop.set()  # workers kill their candidates and return
            raise
        finally:
            pool.shutdown(wait=True)

    def step(self) -> FrozenNode:
        """Expand one node: select, write, review, run, evaluate, persist. Returns the
        finished node. With ``policy="mcgs"``, an ensemble node is built first whenever
        ``ensemble_every`` new valid nodes have appeared since the last one."""
        launched = self._launch()
        if launched is None:
            return self.nodes()[-1]
        node, timeout, seed = launched
        return self._execute(node, timeout, seed=seed)

    def _launch(self) -> tuple[FrozenNode, float, int] | None:
        """Select, write, review and store the next node.

        Returns:
            ``(node, timeout_s, seed)`` of a PENDING node ready to run, or None when the step
            finished without a candidate to run (a program the Code Review rejected, or an
            in-search ensemble, which is built and run here).
        """
        from mcgs.operators import OperatorContext, build_request
        from mcgs.operators.code_review import review_program

        queued = self.storage.claim_node(self.run_id, self.owner, self.settings.lease_s)
        if queued is not None:  # a node retried after its worker was lost, or queued by another process
            return queued, self._node_timeout(), self._node_seed(queued)
        g = self.graph()
        if self._ensemble_due(g):
            if self.build_ensemble(reason="ensemble during the search") is not None:
                return None
        exp = select_expansion(g, self.settings, progress=self.clock.progress, higher_is_better=self.task.higher_is_better, rng=self._rng)
        seq_next = newest_node(g).seq + 1
        ctx = OperatorContext(graph=g, task=self.task, profile=self.profile, settings=self.settings, seed=self.settings.seed * 100_003 + seq_next, seq=seq_next)
        request = build_request(ctx, exp)
        answer = self._next_plan() if exp.operator is Operator.DRAFT and self._plan_queue else self.coder.write(request)
        if not isinstance(answer, CoderAnswer):  # a user's coder object
            raise TypeError(f"{type(self.coder).__name__}.write returned a {type(answer).__name__}; it must return "
                            f"mcgs.CoderAnswer(plan=..., code=..., config={{...}})")
        review = review_program(answer.code, train_only_columns=self.profile.get("train_only_columns", ()))
        if not review.rejected and hasattr(self.coder, "review_program"):  # the LLM path adds a model review
            verdict = self.coder.review_program(review.code, request)
            if verdict is not None:
                review = review.with_model_review(verdict)
        if exp.operator in (Operator.FUSION, Operator.AGGREGATE):
            inputs = ([exp.parent_id] if exp.operator is Operator.FUSION else []) + list(exp.references)
            edges = [(i, EdgeKind.FUSES, {}) for i in dict.fromkeys(inputs)]
        else:
            edges = [(i, EdgeKind.REFERENCES, {}) for i in exp.references]
        node = self.storage.add_node(
            self.run_id,
            parent_id=exp.parent_id,
            operator=exp.operator,
            plan=f"[{exp.reason}] {answer.plan}",
            code=review.code,
            config=answer.config,
            knowledge_ids=answer.knowledge_ids,
            extra_edges=edges,
            review=review.as_dict(),
            owner=self.owner,
            lease_s=self.settings.lease_s,
        )
        if answer.ledger_ids:  # calls made before the node had a number (a screened draft plan)
            self.storage.assign_llm_calls(self.run_id, answer.ledger_ids, node.seq)
        if review.rejected:
            self._reject(node, review)
            return None
        return node, self._node_timeout(), ctx.seed

    def _reject(self, node: FrozenNode, review) -> FrozenNode:
        """Finish a node the Code Review rejected (never run), with its reasons."""
        with self._verdict_lock:
            prior = [n.score for n in valid_nodes(self.graph()) if n.operator is not Operator.ENSEMBLE]
            finished = self.storage.finish_node(
                node.id,
                state=NodeState.REJECTED,
                reward=compute_reward(NodeState.REJECTED, None, prior, self.task.higher_is_better),
                error="code review rejected the program: " + "; ".join(review.reasons),
                runtime_s=0.0,
            )
            self._after_node(finished, prior)
        return finished

    # ------------------------------------------------------------------ baseline (MLAgentBench)

    def _run_baseline(self) -> None:
        """Run ``RUN_DIR/baseline.py`` (given with ``baseline=``) as the first node, once.

        The starter program becomes a root-level node (operator draft, ``config.baseline``) so
        the search builds from it: it is reviewed, run and scored like any candidate, and counts
        as one of the drafts (MLAgentBench, Huang et al. 2024, §2: the agent starts from a
        baseline program and is judged by its improvement over it).
        """
        from mcgs.operators.code_review import review_program

        path = self.run_dir / BASELINE_NAME
        if not path.is_file() or any(n.config.get("baseline") and n.state.is_finished() for n in self.nodes()):
            return
        review = review_program(path.read_text(), train_only_columns=self.profile.get("train_only_columns", ()))
        root = next(n for n in self.nodes() if n.parent_id is None)
        node = self.storage.add_node(
            self.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="[baseline] the starter program given with --baseline",
            code=review.code, config={"baseline": True, "author": "baseline"}, review=review.as_dict(),
            owner=self.owner, lease_s=self.settings.lease_s,
        )
        if review.rejected:
            done = self._reject(node, review)
        else:
            done = self._execute(node, min(self.settings.node_limit_s, self.clock.remaining - self._reserve_s), seed=self.settings.seed)
        score = f" {self.task.metric} {done.score:.6g}" if done.score is not None else ""
        self.say(f"baseline: {done.state.value}{score}" + (f" ({done.error})" if done.error else ""))

    # ------------------------------------------------------------------ multi-plan drafting

    @property
    def _plans_path(self) -> Path:
        return self.run_dir / "screen" / "plans.json"

    def _prepare_plans(self) -> None:
        """Write ``plan_candidates`` draft plans, screen them on a row subsample, and queue
        them best first for the drafts (:mod:`mcgs.screening`). On resume, the stored ranking
        is reused and plans already drafted are skipped."""
        from mcgs.screening import build_screen_task, load_plans, rank_plans, run_screen, save_plans

        k = self.settings.plan_candidates
        drafted = sum(n.operator is Operator.DRAFT for n in self.nodes())
        if self._plans_path.is_file():
            ranked, _ = load_plans(self._plans_path)
            self._plan_queue = ranked[drafted:]
            return
        if k <= 0 or drafted > 0:
            return
        from mcgs.operators import OperatorContext, build_request
        from mcgs.policy import Expansion

        g = self.graph()
        root = next(n for n in self.nodes() if n.parent_id is None)
        plans, stubs = [], []
        for i in range(k):
            ctx = OperatorContext(graph=g, task=self.task, profile=self.profile, settings=self.settings, seed=self.settings.seed * 100_003 + 1 + i)
            req = dataclasses.replace(build_request(ctx, Expansion(parent_id=root.id, operator=Operator.DRAFT, reason="plan")), siblings=tuple(stubs))
            answer = self.coder.write(req)
            model = (answer.config or {}).get("model")
            if any(a.code == answer.code or (model and (a.config or {}).get("model") == model) for a in plans):
                break  # the coder has no new plan (a recipe coder repeats a model family)
            plans.append(answer)
            stubs.append(FrozenNode(id=-1 - i, seq=-1 - i, parent_id=root.id, operator=Operator.DRAFT, state=NodeState.PENDING, config=answer.config, plan=answer.plan))
        share = self.settings.screen_share * self.clock.remaining
        if share < 5.0 * len(plans):
            self.say(f"budget too small to screen {len(plans)} draft plans ({share:.0f}s of screening time); drafting them in the order the coder proposed")
            return
        folder = self.run_dir / "screen"
        screen = build_screen_task(self.task, folder / "task", self.settings.screen_rows, self.settings.seed)
        threads = max(1, self.settings.cpu_threads)
        t0 = time.monotonic()
        results = run_screen(
            plans, screen, folder, timeout_s=self.settings.screen_timeout_s, time_share_s=share, threads=threads,
            memory_mb=self.settings.memory_mb, cancel=self._stop, train_only_columns=self.profile.get("train_only_columns", ()),
            isolation=self.isolation, disk_mb=self.disk_cap_mb(), max_output_bytes=self.max_output_bytes,
        )
        ranked = rank_plans(results, self.task.higher_is_better)
        save_plans(self._plans_path, ranked, {"rows": screen.n_train, "seconds": round(time.monotonic() - t0, 1)})
        self.say(f"screened {sum(r.state != 'skipped' for r in ranked)} of {len(ranked)} draft plans on {screen.n_train} rows; drafting best first:")
        for r in ranked:
            model = r.answer.config.get("model", "?") if r.answer.config else "?"
            self.say(f"  plan {model}: {r.state}{f' {r.score:.5g}' if r.score is not None else ''} ({r.runtime_s:.1f}s)")
        self._plan_queue = ranked

    def _next_plan(self):
        """The best remaining screened plan, its screening result noted in the plan text."""
        r = self._plan_queue.pop(0)
        note = f"screened: {self.task.metric} {r.score:.5g} on a row subsample in {r.runtime_s:.0f}s" if r.score is not None else f"screening: {r.state}"
        return dataclasses.replace(r.answer, plan=f"({note}) {r.answer.plan}")

    def _ensemble_due(self, g) -> bool:
        """True when the mcgs policy should build an ensemble now: ``ensemble_every`` valid
        search nodes have finished since the last ensemble node (or since the start), and the
        time spent selecting ensembles during the search is within ``ensemble_time_share`` of
        the elapsed wall time."""
        from mcgs.graph import newest_first
        from mcgs.policy import ranked_search_nodes

        every = self.settings.ensemble_every
        if self.settings.policy != "mcgs" or not self.settings.ensemble or every <= 0:
            return False
        valid = len(ranked_search_nodes(g, self.task.higher_is_better))
        if valid < self._ensemble_checked + every:
            return False
        fresh = 0  # valid search nodes since the last ensemble node
        for n in newest_first(g):
            if n.operator is Operator.ENSEMBLE:
                break
            fresh += n.is_valid
        if fresh < every:
            return False
        share = self.settings.ensemble_time_share
        if share > 0 and self._ensemble_select_s > share * self.clock.elapsed:
            logger.info("ensemble during the search put off: %.1f s spent selecting ensembles, over %.0f %% of %.0f s",
                        self._ensemble_select_s, 100 * share, self.clock.elapsed)
            return False
        return True

    def _execute(self, node: FrozenNode, timeout: float, seed: int) -> FrozenNode:
        """Run a stored node's program in its workspace, evaluate it, and persist the verdict."""
        ws = self._with_space(lambda: prepare_workspace(self.input_dir, self.node_dir(node), node.code), self.node_dir(node))
        if node.operator is Operator.ENSEMBLE:
            try:
                self._copy_members(node, ws)
            except CandidateFileError as exc:  # a member's workspace was removed or damaged since
                self.storage.set_running(node.id, str(ws.relative_to(self.run_dir)))
                return self._record_verdict(node, NodeState.INVALID_OUTPUT, None, f"a member's artifacts are lost: {exc}", None)
        self.storage.set_running(node.id, str(ws.relative_to(self.run_dir)))
        timeout = max(1.0, timeout)
        result = run_program(ws, "solution.py", self.sandbox_limits(timeout), extra_env={"MCGS_SEED": str(seed)}, cancel=self._stop)
        if self._stop.is_set():  # stopped by the user: no verdict on the program
            raise KeyboardInterrupt("stop requested")
        state = _OUTCOME_STATE[result.outcome]
        error = result.error
        if state is NodeState.TIMEOUT and timeout < self.settings.node_limit_s - 1e-6:
            # Cut short by the end of the run's budget, not by its own time limit: no verdict,
            # so a resumed run with more budget tries this expansion again.
            state, error = NodeState.INTERRUPTED, f"stopped after {timeout:.0f}s: the run's time budget ended"
        score = None
        if state is NodeState.VALID:
            try:
                score = evaluate_workspace(self.labels, ws, max_bytes=self.max_output_bytes).score
            except OutputError as exc:
                state, error = NodeState.INVALID_OUTPUT, str(exc)
        if state is NodeState.BUGGY and result.traceback_tail:
            error = f"{error}\n{result.traceback_tail}" if error else result.traceback_tail
        if state is not NodeState.VALID and not self.settings.keep_workspaces:
            with contextlib.suppress(OSError):
                remove_tree(ws / "working")
        return self._record_verdict(node, state, score, error, result)

    def _record_verdict(self, node: FrozenNode, state: NodeState, score: float | None, error: str | None, result) -> FrozenNode:
        """Store a node's verdict with its reward (``result``: the sandbox's record, None when the
        program never ran) and run what follows a finished node."""
        with self._verdict_lock:  # one verdict at a time: rewards see every earlier verdict
            prior = [n.score for n in valid_nodes(self.graph()) if n.operator is not Operator.ENSEMBLE]
            reward = None if state is NodeState.INTERRUPTED else compute_reward(state, score, prior, self.task.higher_is_better, self.settings.improvement_threshold)
            try:
                finished = self.storage.finish_node(
                    node.id,
                    state=state,
                    score=score,
                    reward=reward,
                    error=error,
                    stdout_tail=result.stdout_tail if result else "",
                    stderr_tail=result.stderr_tail if result else "",
                    runtime_s=result.runtime_s if result else 0.0,
                    owner=self.owner,
                )
            except ClaimLost as exc:  # our lease lapsed (a stalled engine) and the node was retried
                logger.warning("%s", exc)
                return self.storage.get_node(node.id)
            self._after_node(finished, prior)
        return finished

    @property
    def max_output_bytes(self) -> int:
        """Cap on one file read or copied out of a workspace, bytes (setting ``max_output_mb``)."""
        return int(self.settings.max_output_mb * 2**20)

    def disk_cap_mb(self) -> float:
        """The disk cap of one candidate's workspace, MiB: the ``disk_mb`` setting, or half of
        the free space above ``min_free_disk_mb`` on the run's disk now, shared among the
        workers (at least 256 MiB)."""
        if self.settings.disk_mb is not None:
            return self.settings.disk_mb
        free = shutil.disk_usage(self.run_dir).free / 2**20
        floor = float(self.live_setting("min_free_disk_mb"))
        return max(256.0, (free - floor) / (2 * self.settings.workers))

    def sandbox_limits(self, timeout_s: float, threads: int | None = None) -> SandboxLimits:
        """The limits every run of this run's node code gets (search, ensembles, export's
        measurements): ``timeout_s`` (at least 1 s), the memory limit, the disk cap, the
        candidate's share of the CPU threads (or ``threads``) and the run's isolation."""
        threads = threads or max(1, self.settings.cpu_threads // self.settings.workers)
        return SandboxLimits(timeout_s=max(1.0, timeout_s), memory_mb=self.settings.memory_mb, cpu_threads=threads,
                             isolation=self.isolation, disk_mb=self.disk_cap_mb())

    def build_ensemble(self, reason: str = "final ensemble") -> FrozenNode | None:
        """Add an ensemble node over the best valid nodes (greedy forward selection with
        replacement on their OOF predictions, Caruana et al. 2004) and run it like any node.

        The members' OOF and test predictions are copied into the ensemble's own workspace
        (``members/<node>/``), so its program reads nothing outside it and passes the Code
        Review like every other program.

        Args:
            reason: Shown in the node's plan (``final ensemble`` at the end of the run).

        Returns:
            The ensemble node, or None when fewer than two nodes are worth combining.
        """
        final = reason == "final ensemble"
        t0 = time.monotonic()
        node = self._add_ensemble_node(reason)
        if not final:
            self._ensemble_select_s += time.monotonic() - t0
        if node is None:
            return None
        timeout = max(self.clock.remaining, 60.0) if final else min(self.settings.node_limit_s, self.clock.remaining - self._reserve_s)
        return self._execute(node, timeout, seed=self.settings.seed)

    def _add_ensemble_node(self, reason: str) -> FrozenNode | None:
        """Select an ensemble (:meth:`build_ensemble`) and store it as a PENDING node; None when
        fewer than two nodes are worth combining."""
        from mcgs.ensemble import nested_ensemble_score, render_ensemble_program, render_stacking_program, select_ensemble
        from mcgs.evaluation import read_predictions

        valid = valid_nodes(self.graph())
        members = [n for n in valid if n.operator is not Operator.ENSEMBLE]
        self._ensemble_checked = len(members)
        members.sort(key=lambda n: (-n.score if self.task.higher_is_better else n.score, n.seq))
        # the best nodes, plus the members of earlier ensembles: a weak node can be a strong
        # member (a calibrated or diverse one), and a later selection should be able to find at
        # least what an earlier one found
        earlier = {int(i) for e in valid if e.operator is Operator.ENSEMBLE for i in e.config.get("weights", {})}
        top = members[: self.settings.ensemble_max_members]
        members = top + [n for n in members[self.settings.ensemble_max_members :] if n.id in earlier]
        if len(members) < 2:
            return None
        rows = self.labels.validated_rows
        oofs = {}
        for n in members:
            try:
                oofs[n.id] = read_predictions(self.task, self.node_dir(n), OOF_PATH, rows, max_bytes=self.max_output_bytes)
            except OutputError:  # workspace removed or damaged: not a candidate
                continue
        if len(oofs) < 2:
            return None
        trim = self.settings.ensemble_gross_error_sd
        sel = select_ensemble(self.task, self.labels.y[rows], oofs, gross_error_sd=trim)
        if len(sel.weights) < 2 and (sel.temperature == 1.0 or self.settings.ensemble_method == "stacking"):
            logger.info("%s: selection kept a single node; no ensemble node added", reason)
            return None
        try:  # the honest estimate of this ensemble, used for the final choice (final_node)
            nested = nested_ensemble_score(self.task, self.labels.y[rows], oofs, self.labels.folds[rows], gross_error_sd=trim)
        except ValueError as exc:  # a fold too small for the metric (one class): keep the OOF score
            logger.info("%s: no cross-fitted score (%s)", reason, exc)
            nested = None
        # one member with a fitted temperature is a calibration of that node: still a node of
        # its own, scored on the same OOF rows like any other
        by_id = {n.id: n for n in members}
        weights = {f"members/{self.node_dir(by_id[i]).name}": w for i, w in sel.weights.items()}
        if self.settings.ensemble_method == "stacking":
            plan = (
                f"[{reason}] Stacking: a second-level model on the OOF predictions of the {len(sel.weights)} nodes that greedy "
                f"forward selection kept from the best {len(oofs)} valid nodes (node seq) " + ", ".join(str(by_id[i].seq) for i in sel.weights)
            )
            code = render_stacking_program(list(weights), plan)
        else:
            plan = (
                f"[{reason}] Greedy forward selection with replacement over the OOF predictions of the best "
                f"{len(oofs)} valid nodes ({sel.criterion} {sel.criterion_value:.6g}); members (node seq: weight) "
                + ", ".join(f"{by_id[i].seq}: {w}" for i, w in sel.weights.items())
                + (f"; {sel.blend} blend" if sel.blend != "mean" else "")
                + (f"; temperature {sel.temperature:g}" if sel.temperature != 1.0 else "")
                + (
                    f"; {sel.excluded_rows} OOF rows with gross errors (beyond {trim:g} robust SDs of the members' median) "
                    "left out of the selection, not of the score"
                    if sel.excluded_rows
                    else ""
                )
            )
            code = render_ensemble_program(weights, plan, sel.blend, sel.temperature)
        from mcgs.operators.code_review import review_program

        review = review_program(code)
        root = next(n for n in self.nodes() if n.parent_id is None)
        node = self.storage.add_node(
            self.run_id,
            parent_id=root.id,
            operator=Operator.ENSEMBLE,
            plan=plan,
            code=review.code,
            config={
                "weights": {str(i): w for i, w in sel.weights.items()},
                "criterion": sel.criterion,
                "method": self.settings.ensemble_method,
                "blend": sel.blend,
                "temperature": sel.temperature,
                "excluded_rows": sel.excluded_rows,
                "nested_score": nested,
            },
            extra_edges=[(i, EdgeKind.ENSEMBLES, {"weight": w}) for i, w in sel.weights.items()],
            review=review.as_dict(),
            owner=self.owner,
            lease_s=self.settings.lease_s,
        )
        return node

    def _copy_members(self, node: FrozenNode, dest: Path) -> None:
        """Copy an ensemble node's members' prediction files to ``dest/members/<node>/``, read
        safely (:mod:`mcgs.candidate_files`).

        Raises:
            CandidateFileError: a member's file is gone, a link, or over the size cap.
        """
        by_id = {n.id: n for n in self.nodes()}
        for member_id in node.config["weights"]:
            member = self.node_dir(by_id[int(member_id)])
            for name in (OOF_PATH, TEST_PRED_PATH):
                copy_candidate_file(member, name, dest / "members" / member.name / name, max_bytes=self.max_output_bytes)

    @property
    def final_node(self) -> FrozenNode | None:
        """The node whose submission the run hands in: the best single node or an ensemble
        node, chosen by :func:`mcgs.ensemble.choose_final` (ensembles judged by their
        cross-fitted score; the one-standard-error rule for ensembles built after the best node).
        Once the final ensemble exists it is the only ensemble considered. A node whose
        artifacts are lost (its workspace removed or damaged since it was scored:
        :meth:`lost_artifacts`) is passed over, said once. None when no valid node exists."""
        from mcgs.ensemble import choose_final, fold_standard_error
        from mcgs.evaluation import read_predictions

        valid = valid_nodes(self.graph())
        order = (lambda n: (-n.score, n.seq)) if self.task.higher_is_better else (lambda n: (n.score, n.seq))
        singles = sorted((n for n in valid if n.operator is not Operator.ENSEMBLE), key=order)
        ensembles = [n for n in valid if n.operator is Operator.ENSEMBLE]
        lost: set[int] = set()
        i = 0
        while i < len(singles):
            best = singles[i]

            def standard_error(best=best) -> float:
                rows = self.labels.validated_rows
                try:
                    oof = read_predictions(self.task, self.node_dir(best), OOF_PATH, rows, max_bytes=self.max_output_bytes)
                except OutputError:  # the workspace is gone: no slack
                    return 0.0
                return fold_standard_error(self.task, self.labels.y[rows], oof, self.labels.folds[rows])

            final = choose_final(best, [e for e in ensembles if e.id not in lost], self.task.higher_is_better, standard_error)
            problem = self.lost_artifacts(final)
            if problem is None:
                return final
            lost.add(final.id)
            if final.id == best.id:
                i += 1
            if final.id not in self._lost_said:
                self._lost_said.add(final.id)
                warn = logger.warning if self.say == logger.info else self.say
                if len(self._lost_said) <= LOST_SAID_MAX:
                    warn(f"warning: node {final.seq}'s artifacts are lost ({problem}); it cannot be handed in, so the run "
                         f"chooses among the other nodes")
                elif len(self._lost_said) == LOST_SAID_MAX + 1:
                    warn("warning: the artifacts of more nodes are lost too; they are passed over without a word each")
        return None

    def lost_artifacts(self, node: FrozenNode) -> str | None:
        """Why ``node`` cannot be handed in any more, or None: its workspace (or, for an ensemble,
        a member's) no longer holds its submission and predictions as regular files."""
        needed = [(node, (SUBMISSION_PATH,))]
        if node.operator is Operator.ENSEMBLE:
            by_id = {n.id: n for n in self.nodes()}
            needed += [(by_id[int(i)], (OOF_PATH, TEST_PRED_PATH)) for i in node.config.get("weights", {}) if int(i) in by_id]
        for n, files in needed:
            ws = self.node_dir(n)
            if not ws.is_dir():
                return f"the workspace {ws} of node {n.seq} is gone"
            for rel in files:
                if not candidate_file_exists(ws, rel):
                    return f"{rel} of node {n.seq} is missing or not a regular file"
        return None

    def _after_node(self, node: FrozenNode, prior: list[float]) -> None:
        if self.is_worker:  # the run's own process keeps best/ and the clock
            for cb in self.callbacks:
                cb(self, node)
            return
        if node.is_valid and node.operator is not Operator.ENSEMBLE:
            is_best = not prior or (node.score > max(prior) if self.task.higher_is_better else node.score < min(prior))
            if is_best:
                self.export_best(node)
        self._save_progress()
        for cb in self.callbacks:
            cb(self, node)

    def _save_progress(self, status: str | None = None) -> None:
        fields: dict[str, Any] = {"elapsed_s": self.clock.elapsed}
        final = self.final_node
        if final is not None:
            fields["best_node_id"] = final.id
        if status:
            fields["status"] = status
        self.storage.update_run(self.run_id, **fields)

    def export_best(self, node: FrozenNode | None = None) -> Path | None:
        """Write ``best/`` for a node: ``solution.py``, ``submission.csv``, ``node.json``, and
        what the program needs to run again from that folder (``input`` linked to the run's
        read-only input; for an ensemble, its members' prediction files under ``members/``).

        ``cd RUN_DIR/best && python solution.py`` re-creates ``submission/submission.csv``.
        Files are written atomically (temp file, fsync, rename).

        Returns:
            The ``best`` folder, or None when there is no valid node.
        """

        node = node or self.best_node
        if node is None:
            return None
        return self._with_space(lambda: self._write_best(node), self.run_dir / "best")

    def _write_best(self, node: FrozenNode) -> Path:
        ws = self.node_dir(node)
        best = self.run_dir / "best"
        best.mkdir(exist_ok=True)
        link = best / "input"
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(self.input_dir, best), target_is_directory=True)
        if node.operator is Operator.ENSEMBLE:
            shutil.rmtree(best / "members", ignore_errors=True)
            self._copy_members(node, best)
        _atomic_write(best / "solution.py", node.code.encode())
        copy_candidate_file(ws, SUBMISSION_PATH, best / "submission.csv", max_bytes=self.max_output_bytes)
        info = {
            "node": node.seq,
            "storage_id": node.id,
            "operator": node.operator.value,
            "score": node.score,
            "metric": self.task.metric,
            "higher_is_better": self.task.higher_is_better,
            "plan": node.plan,
        }
        _atomic_write(best / "node.json", json.dumps(info, indent=2).encode())
        return best

    # ------------------------------------------------------------------ helpers

    def _load_profile(self) -> dict[str, Any]:
        path = self.run_dir / "profile.json"
        if path.is_file():
            return json.loads(path.read_text())
        if self.read_only:
            return profile_task(self.task.model_copy(update={"data_dir": self.input_dir}))
        prof = profile_task(self.task)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # workers may open a new run at once
        tmp.write_text(json.dumps(prof, indent=2))
        os.replace(tmp, path)
        return prof


def resolve_coder_name(settings: SearchSettings) -> str:
    """``recipe`` or ``anthropic``: ``auto`` means anthropic when ``ANTHROPIC_API_KEY`` is set."""
    if settings.coder != "auto":
        return settings.coder
    return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "recipe"


def _default_coder(settings: SearchSettings) -> Coder:
    """The coder named by the settings (resolved once at run creation and stored)."""
    from mcgs.coders.recipe import RecipeCoder

    recipe = RecipeCoder(seed=settings.seed, models=settings.recipe_models)
    if resolve_coder_name(settings) == "anthropic":
        from mcgs.coders.anthropic import AnthropicCoder

        return AnthropicCoder(settings, fallback=recipe)
    return recipe


def create_search(
    task: str | Path | TaskSpec,
    run_dir: str | Path,
    *,
    settings: SearchSettings | None = None,
    coder: Coder | None = None,
    callbacks: Sequence[Callback] = (),
    baseline: str | Path | None = None,
    storage: str | None = None,
) -> Search:
    """Create a new run in ``run_dir`` (which must not hold a run yet).

    Args:
        storage: SQLAlchemy URL of the storage, e.g. ``postgresql+psycopg://host/db`` for
            workers on several machines; default ``sqlite:///RUN_DIR/mcgs.db``. The run is named
            after ``run_dir`` and its artifacts (workspaces, predictions) stay in ``run_dir``.
        baseline: A starter program following the solution contract; it is copied to
            ``RUN_DIR/baseline.py`` and run as the first node, and the search builds from it
            (MLAgentBench-style improvement).

    Raises:
        TaskError: the task folder is invalid.
        RunError: ``run_dir`` already holds a run (use :func:`mcgs.load_search` to resume it), or
            the baseline file does not exist.
    """
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    settings = settings or SearchSettings()
    if coder is None and settings.coder == "auto":  # store what "auto" meant, so resume agrees
        settings = settings.model_copy(update={"coder": resolve_coder_name(settings)})
    from mcgs.sandbox import resolve_isolation

    try:
        settings = settings.model_copy(update={"isolation": resolve_isolation(settings.isolation)})
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    if spec.constraints.interpretable and settings.ensemble:
        # a blend of several models is not one a person can inspect
        logger.info("the task asks for an interpretable model: no ensembles")
        settings = settings.model_copy(update={"ensemble": False})
    run_dir = Path(run_dir)
    if (run_dir / DB_NAME).exists() or (run_dir / STORAGE_NAME).exists():
        raise RunError(f"{run_dir} already holds a run; resume it (`mcgs resume {run_dir}`, mcgs.load_search) or choose another run folder")
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(f"run folder {run_dir} is a file; give the path of a new folder")
    check_run_folder(run_dir)
    data = spec.data_dir.resolve()
    if run_dir.resolve().is_relative_to(data):  # (a task the run owns may lie inside it: mcgs run --prompt)
        raise RunError(f"run folder {run_dir} is or lies inside the task folder {data}; choose a folder outside it, e.g. {data.parent / 'runs' / data.name}")
    if baseline is not None and not Path(baseline).is_file():
        raise RunError(f"baseline program {baseline} does not exist; give the path of a Python file that follows docs/solution_contract.md")
    if baseline is not None and "members/" in Path(baseline).read_text(errors="replace") and (Path(baseline).parent / "members").is_dir():
        raise RunError(
            f"{baseline} is an ensemble node's program: it blends other nodes' saved predictions (members/) and cannot run "
            f"on its own; give a single node's program, e.g. RUN_DIR/nodes/<node>/solution.py"
        )
    created = not run_dir.exists()
    before = set() if created else set(run_dir.iterdir())
    run_dir.mkdir(parents=True, exist_ok=True)
    store = None
    try:
        if baseline is not None:
            shutil.copyfile(baseline, run_dir / BASELINE_NAME)
        url = storage or default_storage_url(run_dir)
        store = open_storage(url)
        name = run_dir.resolve().name
        if any(r.name == name for r in store.list_runs()):
            store.close()
            raise RunError(f"{safe_url(url)} already holds a run named {name!r}; name the run folder (--out) differently")
        if url != default_storage_url(run_dir):
            (run_dir / STORAGE_NAME).write_text(json.dumps({"url": safe_url(url), "run": name}, indent=2) + "\n")
        run = store.create_run(
            name=name,
            task_json=spec.to_json(),
            settings=settings.model_dump(mode="json"),
            seed=settings.seed,
            data_fingerprint=data_fingerprint(spec),
            package_versions=_package_versions(),
            isolation=settings.isolation,
        )
        return Search(run_dir, store, run, spec, settings, coder or _default_coder(settings), callbacks)
    except BaseException:  # a storage that does not open, bad callbacks: the folder is left as it was
        if store is not None:
            store.close()
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            for p in set(run_dir.iterdir()) - before:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        raise


def open_search(
    run_dir: str | Path,
    *,
    coder: Coder | None = None,
    callbacks: Sequence[Callback] = (),
    time_budget_s: float | None = None,
    storage: str | None = None,
    name: str | None = None,
    read_only: bool = False,
) -> Search:
    """Open an existing run to resume it, to inspect it, or to work on it (:meth:`Search.work`).

    Args:
        run_dir: The run directory (its artifacts: input copy, node workspaces).
        time_budget_s: A new total time budget; by default the stored one.
        storage: Storage URL; default ``RUN_DIR/storage.json`` when the run was created with
            another storage, else ``sqlite:///RUN_DIR/mcgs.db``.
        name: The run's name in that storage; default the only run there.
        read_only: Only to read it (``mcgs status``, ``report``, ``export``): the storage is
            opened read-only and nothing is written (:class:`Search`'s ``read_only``), so an
            archived run on a read-only mount opens; the task's data folder is not checked.

    Raises:
        RunError: no run there, or (unless read-only) its task data changed since the run started.
    """
    run_dir = Path(run_dir)
    store, run = locate_run(run_dir, storage=storage, name=name, read_only=read_only)
    spec = TaskSpec.from_json(run.task_json)
    if not read_only:
        if not spec.data_dir.is_dir():
            raise RunError(f"the task data folder {spec.data_dir} of this run no longer exists; restore it to resume")
        try:
            fp = data_fingerprint(spec)
        except (OSError, TaskError) as exc:
            raise RunError(f"cannot read the task data of this run: {exc}") from exc
        if fp != run.data_fingerprint:
            raise RunError(f"the task data in {spec.data_dir} changed since the run started (fingerprint differs); start a new run")
    from mcgs.metrics import UnknownMetricError, get_metric

    try:  # before any candidate runs: a custom metric is registered per process
        get_metric(spec.metric)
    except UnknownMetricError:
        store.close()
        raise RunError(
            f"the run's metric {spec.metric!r} is not registered in this process; call "
            f"mcgs.register_metric({spec.metric!r}, ...) as when the run was created, then load it again"
        ) from None
    stored = dict(run.settings)
    if time_budget_s is not None:
        stored["time_budget_s"] = time_budget_s
    try:
        settings = SearchSettings(**stored)
    except Exception:
        store.close()
        raise
    if read_only:  # nothing will be written: no coder that could call an API
        from mcgs.coders.recipe import RecipeCoder

        coder = coder or RecipeCoder(seed=settings.seed)
    return Search(run_dir, store, run, spec, settings, coder or _default_coder(settings), callbacks, read_only=read_only)
