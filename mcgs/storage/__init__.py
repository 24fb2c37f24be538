"""Storage API over SQLAlchemy: runs, nodes and typed edges, persisted as they happen.

``Storage("sqlite:///RUN_DIR/mcgs.db")`` is the default (WAL journal, busy timeout, immediate
write transactions so concurrent writers queue instead of failing). Every write is its own
short transaction, so a crash loses at most the candidates that were running (DESIGN §7).

Its parts: :mod:`~mcgs.storage.models` (the tables), :mod:`~mcgs.storage.schema` (opening the
database, migrations, version checks), :mod:`~mcgs.storage.errors` (the errors and the write
guard), :mod:`~mcgs.storage.ledger` (the LLM cost ledger); :class:`Storage` here holds runs,
nodes, edges, claims and leases, and :class:`RunView` reads a run incrementally.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import threading
from typing import Any, Iterable

from sqlalchemy import select, update
from sqlalchemy.orm import sessionmaker

from mcgs.sandbox import owner_alive, owner_id
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeRole, NodeState, Operator, RunStatus
from mcgs.storage.models import SCHEMA_VERSION, EdgeModel, NodeModel, RunModel, utcnow
from mcgs.storage.errors import ClaimLost, NoStorage, StorageError, StorageFull, is_disk_full as _is_disk_full, writes as _writes
from mcgs.storage.ledger import LedgerQueries, LLMCall
from mcgs.storage.schema import check_schema, check_schema_read_only, open_engine, schema_version, upgrade, upgraded_copy

__all__ = ["Storage", "RunView", "RunRecord", "LLMCall", "StorageError", "NoStorage", "StorageFull", "SCHEMA_VERSION", "upgrade", "owner_id",
           "owner_alive", "ClaimLost"]



@dataclasses.dataclass(frozen=True)
class RunRecord:
    """Snapshot of a run row."""

    id: int
    name: str
    status: RunStatus
    task_json: str
    settings: dict[str, Any]
    seed: int
    data_fingerprint: str
    package_versions: dict[str, str]
    isolation: str
    elapsed_s: float
    best_node_id: int | None
    created_at: _dt.datetime
    updated_at: _dt.datetime | None = None


def _lease_end(lease_s: float) -> _dt.datetime:
    return utcnow() + _dt.timedelta(seconds=lease_s)


def _node(m: NodeModel, summary: bool = False) -> FrozenNode:
    """The snapshot of a node row; with ``summary``, without its program and output tails
    (left empty; the row was read without them: :meth:`Storage.get_node_summaries`)."""
    return FrozenNode(
        id=m.id,
        seq=m.seq,
        parent_id=m.parent_id,
        operator=Operator(m.operator),
        state=NodeState(m.state),
        plan=m.plan,
        code="" if summary else m.code,
        config=json.loads(m.config_json or "{}"),
        score=m.score,
        reward=m.reward,
        error=m.error,
        stdout_tail="" if summary else m.stdout_tail or "",
        stderr_tail="" if summary else m.stderr_tail or "",
        runtime_s=m.runtime_s,
        knowledge_ids=tuple(json.loads(m.knowledge_ids_json or "[]")),
        created_at=m.created_at,
        finished_at=m.finished_at,
        workspace=m.workspace,
        depth=m.depth,
        review=json.loads(m.review_json or "{}"),
        owner=m.owner,
        attempts=m.attempts or 0,
        role=NodeRole(m.role or NodeRole.CANDIDATE.value),
        fidelity=1.0 if m.fidelity is None else m.fidelity,
        peak_rss_mb=m.peak_rss_mb,
        gpu=m.gpu,
        peak_gpu_mb=m.peak_gpu_mb,
    )


def _edge(m: EdgeModel) -> FrozenEdge:
    return FrozenEdge(src=m.src_id, dst=m.dst_id, kind=EdgeKind(m.kind), operator=Operator(m.operator), data=json.loads(m.data_json or "{}"))


def _run(m: RunModel) -> RunRecord:
    return RunRecord(
        id=m.id,
        name=m.name,
        status=RunStatus(m.status),
        task_json=m.task_json,
        settings=json.loads(m.settings_json),
        seed=m.seed,
        data_fingerprint=m.data_fingerprint,
        package_versions=json.loads(m.package_versions_json or "{}"),
        isolation=m.isolation,
        elapsed_s=m.elapsed_s,
        best_node_id=m.best_node_id,
        created_at=m.created_at,
        updated_at=m.updated_at,
    )


def _give_back(m: NodeModel, why: str, max_attempts: int) -> bool:
    """Queue the node row ``m`` again (PENDING, no owner, ``why`` kept in ``error``) while it was
    claimed fewer than ``max_attempts`` times, else mark it INTERRUPTED. True when queued again."""
    if (m.attempts or 0) < max_attempts:
        m.state, m.owner, m.lease_expires_at, m.workspace, m.started_at = NodeState.PENDING.value, None, None, None, None
        m.error = f"attempt {m.attempts or 0} lost: {why}; queued again"
        return True
    m.state, m.finished_at = NodeState.INTERRUPTED.value, utcnow()
    m.error = f"interrupted: {why} (attempt {m.attempts or 0} of {max_attempts})"
    return False


class Storage(LedgerQueries):
    """Persistent store of runs, nodes and edges.

    Args:
        url: SQLAlchemy URL, e.g. ``sqlite:///runs/a/mcgs.db``.
        read_only: Open without writing anything (``mcgs status``, ``report``, ``export`` on an
            archived run, a read-only mount): a SQLite file is opened with ``mode=ro``, or
            ``immutable=1`` where its folder cannot be written (then changes left in a
            write-ahead log it cannot read are not seen). A SQLite file of an older schema is
            read through a migrated temporary copy (:func:`mcgs.storage.schema.upgraded_copy`),
            removed by :meth:`close`. Every write method raises.

    Attributes:
        on_full: Called with a :class:`StorageFull` when a write finds the disk full; it returns
            once there is space again (the write is then tried again) or raises. None: the write
            raises :class:`StorageFull`.

    Raises:
        StorageError: when the database was written by an incompatible schema version (or, read
            only, an older PostgreSQL one, which needs a migration only a writer may run).
    """

    def __init__(self, url: str, read_only: bool = False):
        self.url = url
        self.read_only = read_only
        self.on_full = None
        self.is_sqlite = url.startswith("sqlite")
        self.engine, self.where = open_engine(url, read_only)
        self._session = sessionmaker(self.engine, expire_on_commit=False)
        self._upgraded = None
        if read_only:
            version = check_schema_read_only(self.engine, self._session, self.where, allow_older=self.is_sqlite)
            if version < SCHEMA_VERSION:
                self._upgraded, path = upgraded_copy(self.engine)
                self.engine.dispose()
                self.engine, _ = open_engine(f"sqlite:///{path}", read_only=True)
                self._session = sessionmaker(self.engine, expire_on_commit=False)
            return
        try:
            upgrade(self.engine)
            check_schema(self._session, self.url)
        except Exception as exc:
            if _is_disk_full(exc) and not isinstance(exc, StorageError):
                raise StorageFull(self.where, str(getattr(exc, "orig", exc)).splitlines()[0]) from exc
            raise

    @property
    def schema_version(self) -> int:
        """The schema version stored in the database."""
        return schema_version(self._session)

    def close(self) -> None:
        """Release the database (and remove a migrated read-only copy)."""
        self.engine.dispose()
        if self._upgraded is not None:
            self._upgraded.cleanup()
            self._upgraded = None

    # ---------------------------------------------------------------- runs

    @_writes
    def create_run(
        self,
        *,
        name: str,
        task_json: str,
        settings: dict[str, Any],
        seed: int,
        data_fingerprint: str,
        package_versions: dict[str, str],
        isolation: str,
    ) -> RunRecord:
        """Create a run and its root node in one transaction."""
        with self._session.begin() as s:
            run = RunModel(
                name=name,
                task_json=task_json,
                settings_json=json.dumps(settings, default=str),
                seed=seed,
                data_fingerprint=data_fingerprint,
                package_versions_json=json.dumps(package_versions),
                isolation=isolation,
                status=RunStatus.CREATED.value,
            )
            s.add(run)
            s.flush()
            s.add(NodeModel(run_id=run.id, seq=0, operator=Operator.ROOT.value, state=NodeState.ROOT.value, depth=0))
            s.flush()
            return _run(run)

    def get_run(self, name: str) -> RunRecord:
        """Raises StorageError when no run has that name."""
        with self._session() as s:
            m = s.scalars(select(RunModel).where(RunModel.name == name)).first()
            if m is None:
                names = s.scalars(select(RunModel.name)).all()
                raise StorageError(f"no run named {name!r} in {self.url} (runs: {names})")
            return _run(m)

    def list_runs(self) -> list[RunRecord]:
        with self._session() as s:
            return [_run(m) for m in s.scalars(select(RunModel).order_by(RunModel.id))]

    @_writes
    def update_run(self, run_id: int, **fields: Any) -> None:
        """Update run columns (``status``, ``elapsed_s``, ``best_node_id``, ``isolation``,
        ``settings_json``)."""
        allowed = {"status", "elapsed_s", "best_node_id", "isolation", "settings_json"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update run fields {sorted(unknown)}")
        with self._session.begin() as s:
            s.execute(update(RunModel).where(RunModel.id == run_id).values(**fields, updated_at=utcnow()))

    # ---------------------------------------------------------------- nodes

    @_writes
    def add_node(
        self,
        run_id: int,
        *,
        parent_id: int,
        operator: Operator,
        plan: str,
        code: str,
        config: dict[str, Any] | None = None,
        knowledge_ids: Iterable[str] = (),
        extra_edges: Iterable[tuple[int, EdgeKind, dict[str, Any]]] = (),
        state: NodeState = NodeState.PENDING,
        review: dict[str, Any] | None = None,
        owner: str | None = None,
        lease_s: float = 60.0,
        role: NodeRole = NodeRole.CANDIDATE,
        fidelity: float = 1.0,
    ) -> FrozenNode:
        """Insert a node with its ``derives`` edge (and any extra typed edges) atomically.

        Args:
            extra_edges: ``(src_id, kind, data)`` triples for fuses/references/ensembles.
            review: The Code Review verdict to store with the node.
            owner: The worker that will run it (the node is stored claimed, with a lease of
                ``lease_s`` seconds); None queues a PENDING node for any worker to claim.
            role: What the node is for (:class:`~mcgs.node.NodeRole`).
            fidelity: Share of the training rows its program sees (:mod:`mcgs.fidelity`; 1 = full).
        """
        with self._session.begin() as s:
            if not self.is_sqlite:  # serialise seq numbers per run (SQLite's BEGIN IMMEDIATE already does)
                s.execute(select(RunModel.id).where(RunModel.id == run_id).with_for_update())
            parent = s.get(NodeModel, parent_id)
            if parent is None or parent.run_id != run_id:
                raise StorageError(f"parent node {parent_id} is not in run {run_id}")
            seq = (s.scalar(select(NodeModel.seq).where(NodeModel.run_id == run_id).order_by(NodeModel.seq.desc()).limit(1)) or 0) + 1
            m = NodeModel(
                run_id=run_id,
                seq=seq,
                parent_id=parent_id,
                operator=operator.value,
                state=state.value,
                depth=parent.depth + 1,
                plan=plan,
                code=code,
                config_json=json.dumps(config or {}),
                knowledge_ids_json=json.dumps(list(knowledge_ids)),
                review_json=json.dumps(review or {}),
                owner=owner,
                attempts=1 if owner else 0,
                lease_expires_at=_lease_end(lease_s) if owner else None,
                role=role.value,
                fidelity=fidelity,
            )
            s.add(m)
            s.flush()
            s.add(EdgeModel(run_id=run_id, src_id=parent_id, dst_id=m.id, kind=EdgeKind.DERIVES.value, operator=operator.value))
            for src, kind, data in extra_edges:
                s.add(EdgeModel(run_id=run_id, src_id=src, dst_id=m.id, kind=kind.value, operator=operator.value, data_json=json.dumps(data)))
            s.flush()
            return _node(m)

    @_writes
    def set_running(self, node_id: int, workspace: str) -> None:
        with self._session.begin() as s:
            s.execute(
                update(NodeModel)
                .where(NodeModel.id == node_id)
                .values(state=NodeState.RUNNING.value, workspace=workspace, started_at=utcnow())
            )

    # ---------------------------------------------------------------- claims and leases

    @_writes
    def claim_node(self, run_id: int, owner: str, lease_s: float, node_id: int | None = None) -> FrozenNode | None:
        """Claim the oldest queued node of a run (PENDING, no owner) for ``owner``, atomically;
        with ``node_id``, that node only.

        SQLite: the write transaction starts with BEGIN IMMEDIATE, so claimers queue; PostgreSQL:
        ``SELECT ... FOR UPDATE SKIP LOCKED`` (the pattern of job queues on PostgreSQL), and the
        update is a compare-and-set on the owner, so a node is never held by two workers.

        Returns:
            The claimed node (``attempts`` counts this claim), or None when nothing is queued.
        """
        with self._session.begin() as s:
            q = (
                select(NodeModel.id)
                .where(NodeModel.run_id == run_id, NodeModel.state == NodeState.PENDING.value, NodeModel.owner.is_(None))
                .order_by(NodeModel.seq)
                .limit(1)
            )
            if node_id is not None:
                q = q.where(NodeModel.id == node_id)
            if not self.is_sqlite:
                q = q.with_for_update(skip_locked=True)
            node_id = s.scalar(q)
            if node_id is None:
                return None
            res = s.execute(
                update(NodeModel)
                .where(NodeModel.id == node_id, NodeModel.owner.is_(None), NodeModel.state == NodeState.PENDING.value)
                .values(owner=owner, lease_expires_at=_lease_end(lease_s), attempts=NodeModel.attempts + 1)
            )
            if res.rowcount != 1:
                return None
            m = s.get(NodeModel, node_id)
            s.refresh(m)
            return _node(m)

    @_writes
    def renew_leases(self, owner: str, lease_s: float) -> int:
        """Heartbeat: extend the leases of every unfinished node ``owner`` holds.

        Returns:
            How many leases were renewed.
        """
        with self._session.begin() as s:
            res = s.execute(
                update(NodeModel)
                .where(NodeModel.owner == owner, NodeModel.state.in_([NodeState.PENDING.value, NodeState.RUNNING.value]))
                .values(lease_expires_at=_lease_end(lease_s))
            )
            return res.rowcount

    @_writes
    def requeue_lost(self, run_id: int, max_attempts: int) -> tuple[list[int], list[int]]:
        """Find unfinished nodes whose worker is gone and retry them.

        A claim is lost when its lease expired, or when its owner ran on this host and its
        process is gone (a SIGKILLed engine: no need to wait for the lease). Nodes claimed
        fewer than ``max_attempts`` times are queued again (PENDING, no owner; the reason is
        kept in ``error``); the others become INTERRUPTED. Unowned RUNNING nodes (stored before
        claims existed) count as lost.

        Returns:
            ``(requeued_ids, interrupted_ids)``.
        """
        now = utcnow()
        requeued: list[int] = []
        interrupted: list[int] = []
        with self._session.begin() as s:
            q = select(NodeModel).where(
                NodeModel.run_id == run_id,
                NodeModel.state.in_([NodeState.PENDING.value, NodeState.RUNNING.value]),
            )
            if not self.is_sqlite:  # rows being claimed or finished right now are not lost
                q = q.with_for_update(skip_locked=True)
            rows = s.scalars(q).all()
            for m in rows:
                if m.owner is None:
                    if m.state == NodeState.PENDING.value:
                        continue  # queued, waiting for a worker
                    why = "it was running when the engine stopped"
                else:
                    alive = owner_alive(m.owner)
                    expired = m.lease_expires_at is None or m.lease_expires_at < now
                    if alive is True or (alive is None and not expired):
                        continue
                    why = f"its worker {m.owner} " + ("is gone" if alive is False else "stopped renewing its lease")
                (requeued if _give_back(m, why, max_attempts) else interrupted).append(m.id)
        return requeued, interrupted

    @_writes
    def requeue_node(self, node_id: int, owner: str, max_attempts: int, why: str) -> bool:
        """Give back ``owner``'s claim on a node whose program was lost while it ran (a Ray
        worker that died), as :meth:`requeue_lost` does. Returns True when it was queued again;
        False when it is INTERRUPTED now, or is no longer ``owner``'s."""
        with self._session.begin() as s:
            m = s.get(NodeModel, node_id, with_for_update=not self.is_sqlite)
            if m is None or m.owner != owner or m.state not in (NodeState.PENDING.value, NodeState.RUNNING.value):
                return False
            return _give_back(m, why, max_attempts)

    @_writes
    def finish_node(
        self,
        node_id: int,
        *,
        state: NodeState,
        score: float | None = None,
        reward: float | None = None,
        error: str | None = None,
        stdout_tail: str = "",
        stderr_tail: str = "",
        runtime_s: float | None = None,
        owner: str | None = None,
        resources: tuple[float | None, int | None, float | None] = (None, None, None),
    ) -> FrozenNode:
        """Record a node's verdict. Finished nodes are immutable: a second call raises.

        Args:
            owner: The worker recording it; when given, the node must still be claimed by it.
            resources: What its program used: ``(peak_rss_mb, gpu, peak_gpu_mb)``.

        Raises:
            ClaimLost: ``owner`` no longer holds the node (its lease expired meanwhile).
            StorageError: no such node, or it is already finished.
        """
        with self._session.begin() as s:
            if not self.is_sqlite:
                s.execute(select(NodeModel.id).where(NodeModel.id == node_id).with_for_update())
            m = s.get(NodeModel, node_id)
            if m is None:
                raise StorageError(f"node {node_id} does not exist")
            if owner is not None and m.owner != owner:
                raise ClaimLost(f"node {node_id} is no longer held by {owner} (now {m.owner or 'queued'}, state {m.state}); its verdict is dropped")
            if NodeState(m.state).is_finished():
                raise StorageError(f"node {node_id} is already finished ({m.state})")
            m.state = state.value
            m.score = score
            m.reward = reward
            m.error = error
            m.stdout_tail = stdout_tail
            m.stderr_tail = stderr_tail
            m.runtime_s = runtime_s
            m.peak_rss_mb, m.gpu, m.peak_gpu_mb = resources
            m.finished_at = utcnow()
            s.flush()
            return _node(m)

    @_writes
    def interrupt_unfinished(self, run_id: int, owner: str | None = None) -> list[int]:
        """Mark PENDING/RUNNING nodes of a run INTERRUPTED (after a stop).

        Args:
            owner: Only the nodes this worker holds (a stopping worker leaves the others'
                nodes alone); None: every unfinished node of the run.

        Returns:
            Ids of the nodes changed.
        """
        with self._session.begin() as s:
            q = select(NodeModel.id).where(
                NodeModel.run_id == run_id,
                NodeModel.state.in_([NodeState.PENDING.value, NodeState.RUNNING.value]),
            )
            if owner is not None:
                q = q.where(NodeModel.owner == owner)
            ids = list(s.scalars(q))
            if ids:
                s.execute(
                    update(NodeModel)
                    .where(NodeModel.id.in_(ids))
                    .values(state=NodeState.INTERRUPTED.value, error="interrupted: the engine stopped while it ran", finished_at=utcnow())
                )
            return ids

    def get_node(self, node_id: int) -> FrozenNode:
        with self._session() as s:
            m = s.get(NodeModel, node_id)
            if m is None:
                raise StorageError(f"node {node_id} does not exist")
            return _node(m)

    def get_nodes(self, run_id: int) -> list[FrozenNode]:
        """All nodes of a run in creation order."""
        with self._session() as s:
            return [_node(m) for m in s.scalars(select(NodeModel).where(NodeModel.run_id == run_id).order_by(NodeModel.seq))]

    def get_node_summaries(self, run_id: int) -> list[FrozenNode]:
        """All nodes of a run in creation order without their program and output tails
        (``code``, ``stdout_tail`` and ``stderr_tail`` are empty): what a view of the whole run
        reads. At 5 000 nodes of 16 KB programs this reads a tenth of the bytes of
        :meth:`get_nodes` (``experiments/report_scale.py``)."""
        skipped = {"code", "stdout_tail", "stderr_tail"}
        columns = [c for c in NodeModel.__table__.columns if c.key not in skipped]
        with self._session() as s:  # plain rows, not ORM objects: a third of the time at 5 000 nodes
            rows = s.execute(select(*columns).where(NodeModel.run_id == run_id).order_by(NodeModel.seq))
            return [_node(r, summary=True) for r in rows]

    def get_edges(self, run_id: int) -> list[FrozenEdge]:
        """All typed edges of a run."""
        with self._session() as s:  # plain rows, not ORM objects
            return [_edge(r) for r in s.execute(select(*EdgeModel.__table__.columns).where(EdgeModel.run_id == run_id).order_by(EdgeModel.id))]


    def run_view(self, run_id: int) -> "RunView":
        """An in-memory view of one run's nodes and edges that refreshes incrementally (see
        :class:`RunView`); what the search loop reads before every decision."""
        return RunView(self, run_id)


_OPEN_STATES = (NodeState.PENDING.value, NodeState.RUNNING.value)


class RunView:
    """One run's nodes and edges, held in memory and refreshed incrementally from storage.

    A node leaves PENDING / RUNNING once and is never written again (``finish_node`` refuses a
    second verdict; requeueing and interrupting touch only PENDING / RUNNING rows), and edges
    are only ever added. So a refresh reads the rows with a larger id than any seen, plus the
    few nodes still open, instead of every row with its program text (at 10 000 nodes a full
    read from SQLite takes most of a second; ``experiments/engine_cost.py``). Row counts are
    compared after each refresh: a row that committed out of id order (concurrent writers on
    PostgreSQL) makes the view read everything again, so it never misses one.
    """

    def __init__(self, storage: Storage, run_id: int):
        self.storage, self.run_id = storage, run_id
        self._nodes: dict[int, FrozenNode] = {}
        self._edges: dict[int, FrozenEdge] = {}
        self.full_reads = 0  # how many times a refresh read every row (for tests and benchmarks)
        self.version = 0  # grows whenever a refresh found a change (readers cache on it)
        self.epoch = 0  # grows with every full read: changes_since() cannot span one
        self._log: list[tuple[int, list[int]]] = []  # (version, ids of the nodes new or changed)
        self._edge_log: list[int] = []  # edge ids in the order the view got them
        self._open: set[int] = set()  # ids of the PENDING / RUNNING nodes (re-read by every refresh)
        self._max_node = self._max_edge = 0  # the largest ids seen
        self.lock = threading.RLock()  # the search's worker threads refresh it too

    def _keep(self, fn: FrozenNode) -> None:
        self._nodes[fn.id] = fn
        self._max_node = max(self._max_node, fn.id)
        if fn.state.value in _OPEN_STATES:
            self._open.add(fn.id)
        else:
            self._open.discard(fn.id)

    def refresh(self) -> None:
        """Bring the view up to date with storage."""
        from sqlalchemy import func, or_

        with self.lock, self.storage._session() as s:
            n_nodes = s.scalar(select(func.count(NodeModel.id)).where(NodeModel.run_id == self.run_id))
            n_edges = s.scalar(select(func.count(EdgeModel.id)).where(EdgeModel.run_id == self.run_id))
            changed: list[int] = []
            full = False
            if self._nodes:
                q = select(NodeModel).where(NodeModel.run_id == self.run_id,
                                            or_(NodeModel.id > self._max_node, NodeModel.id.in_(sorted(self._open))))
                for m in s.scalars(q):
                    fn = _node(m)
                    if self._nodes.get(m.id) != fn:
                        self._keep(fn)
                        changed.append(m.id)
            if len(self._nodes) != n_nodes:
                self.full_reads += 1
                self._nodes, self._open, self._max_node = {}, set(), 0
                for m in s.scalars(select(NodeModel).where(NodeModel.run_id == self.run_id)):
                    self._keep(_node(m))
                full = True
            new_edges = []
            for m in s.scalars(select(EdgeModel).where(EdgeModel.run_id == self.run_id, EdgeModel.id > self._max_edge)):
                self._edges[m.id] = _edge(m)
                new_edges.append(m.id)
            if len(self._edges) != n_edges:
                self._edges = {m.id: _edge(m) for m in s.scalars(select(EdgeModel).where(EdgeModel.run_id == self.run_id))}
                full = True
            self._max_edge = max(self._edges, default=0) if full else max([self._max_edge, *new_edges])
            if full:
                self.epoch += 1
                self._log, self._edge_log = [], sorted(self._edges)
            else:
                self._edge_log += sorted(new_edges)
            if full or changed or new_edges:
                self.version += 1
                if changed and not full:
                    self._log.append((self.version, changed))

    def changes_since(self, version: int, n_edges: int) -> tuple[list[FrozenNode], list[FrozenEdge]]:
        """The nodes new or changed after ``version`` and the edges after the first ``n_edges``
        the view got, as of the last refresh (an incremental reader's update, e.g. the
        search's graph: :func:`mcgs.graph.update_graph`). Valid within one :attr:`epoch`.

        Args:
            version: The :attr:`version` the reader is up to date with.
            n_edges: How many edges the reader has had (:attr:`edge_count` then).
        """
        with self.lock:
            ids: dict[int, None] = {}
            for v, changed in reversed(self._log):
                if v <= version:
                    break
                ids.update(dict.fromkeys(changed))
            return [self._nodes[i] for i in ids], [self._edges[i] for i in self._edge_log[n_edges:]]

    @property
    def edge_count(self) -> int:
        """Edges the view holds (an offset for :meth:`changes_since`)."""
        return len(self._edge_log)

    def nodes(self) -> list[FrozenNode]:
        """Every node of the run in creation order, after a refresh."""
        with self.lock:
            self.refresh()
            return sorted(self._nodes.values(), key=lambda n: n.seq)

    def edges(self) -> list[FrozenEdge]:
        """Every edge of the run in creation order (as of the last refresh)."""
        with self.lock:
            return [self._edges[i] for i in sorted(self._edges)]
