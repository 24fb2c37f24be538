"""Node states, operators, edge kinds and frozen node snapshots (DESIGN §4).

A node is one program and its outcome. Live state lives in storage; everything handed to
policies, callbacks and the CLI is a :class:`FrozenNode` snapshot (as Optuna's ``FrozenTrial``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
from typing import Any

__all__ = ["RunStatus", "NodeState", "Operator", "EdgeKind", "NodeRole", "FrozenNode", "FrozenEdge"]


class RunStatus(str, enum.Enum):
    """Life cycle of a run, as stored on its record.

    ``CREATED`` -> ``RUNNING`` (an engine searches it; ``PAUSED`` while its disk is full;
    ``ENSEMBLING`` while it builds the final ensemble, when ``mcgs worker``s start no new node)
    -> ``FINISHED``, or ``STOPPED`` (Ctrl-C, SIGTERM, an error: ``mcgs resume`` goes on). A run
    stored as running whose engine holds no lock any more was killed (``mcgs.snapshot.engine_gone``).
    Members compare equal to their values and print as them.
    """

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    ENSEMBLING = "ensembling"
    STOPPED = "stopped"
    FINISHED = "finished"

    def __str__(self) -> str:
        return self.value

    def is_live(self) -> bool:
        """Whether an engine should be searching the run now."""
        return self in (RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.ENSEMBLING)


class NodeState(str, enum.Enum):
    """Life cycle of a node.

    ``ROOT`` is the task's root (no program). ``PENDING`` -> ``RUNNING`` -> one finished
    state. ``VALID`` is the only success; ``BUGGY``, ``TIMEOUT``, ``OOM``, ``DISK`` (past its
    disk cap), ``PROCESS_LIMIT`` (past its limit on processes and threads) and
    ``INVALID_OUTPUT`` are failures (reward -1, Debug may fix them), and so is ``REJECTED``: the
    static Code Review refused to run the program (reasons on the node). ``INTERRUPTED`` marks a
    candidate killed because the engine stopped; it is not a verdict on the program.
    """

    ROOT = "root"
    PENDING = "pending"
    RUNNING = "running"
    VALID = "valid"
    BUGGY = "buggy"
    TIMEOUT = "timeout"
    OOM = "oom"
    DISK = "disk"
    PROCESS_LIMIT = "process_limit"
    INVALID_OUTPUT = "invalid_output"
    INTERRUPTED = "interrupted"
    REJECTED = "rejected"

    def is_finished(self) -> bool:
        """True for states that carry a verdict on the program."""
        return self in _FINISHED

    def is_failure(self) -> bool:
        """True for finished states that are not VALID."""
        return self in _FAILURES


_FAILURES = frozenset({NodeState.BUGGY, NodeState.TIMEOUT, NodeState.OOM, NodeState.DISK, NodeState.PROCESS_LIMIT,
                       NodeState.INVALID_OUTPUT, NodeState.REJECTED})
_FINISHED = _FAILURES | {NodeState.VALID}


class Operator(str, enum.Enum):
    """The operator that created a node (recorded on the node and on its ``derives`` edge)."""

    ROOT = "root"
    DRAFT = "draft"
    DEBUG = "debug"
    IMPROVE = "improve"
    EVOLVE = "evolve"
    FUSION = "fusion"
    AGGREGATE = "aggregate"
    ENSEMBLE = "ensemble"


class NodeRole(str, enum.Enum):
    """What a node is for, besides the operator that made it; stored in its own column.

    ``CANDIDATE``: a node of the search (every operator's, the in-search ensembles included).
    ``FINAL_ENSEMBLE``: the ensemble built once at the end of a run over the best nodes; the
    final choice (:func:`mcgs.ensemble.choose_final`) weighs it against the best single node and
    no other ensemble is built after it.
    """

    CANDIDATE = "candidate"
    FINAL_ENSEMBLE = "final_ensemble"


class EdgeKind(str, enum.Enum):
    """Typed edges of the search graph. ``DERIVES`` edges (primary parent -> child) form the
    tree that carries UCT statistics; the others make it a graph."""

    DERIVES = "derives"
    FUSES = "fuses"
    REFERENCES = "references"
    ENSEMBLES = "ensembles"


@dataclasses.dataclass(frozen=True)
class FrozenNode:
    """Immutable snapshot of a node as stored.

    Attributes:
        id: Storage id (unique within a storage).
        seq: 0-based creation order within the run (root = 0).
        parent_id: Primary parent (``derives`` edge source), None for the root.
        operator, state: See the enums.
        plan: The coder's plan text.
        code: The program (empty for the root).
        config: The recipe coder's structured configuration (JSON), used by Improve/Debug.
        score: Engine-computed validation score, None unless VALID.
        reward: Reward fixed when the node finished (DESIGN §4), None until then.
        error: Short reason for a failure.
        stdout_tail, stderr_tail: Capped output tails.
        runtime_s: Wall time of the candidate in seconds.
        knowledge_ids: Knowledge-base entries the program was built from.
        created_at, finished_at: UTC timestamps.
        workspace: Path of the node's workspace relative to the run directory.
        review: The static Code Review's verdict and reasons (``{"verdict": ..., "reasons": [...]}``).
        owner: The worker holding the node's claim (``host:pid:start``), None when queued or
            for nodes stored before claims existed.
        attempts: How many times the node was claimed (more than one: a worker was lost and
            the node retried).
        role: :class:`NodeRole` (the final ensemble, or a search candidate).
        fidelity: Share of the training rows the program saw, in (0, 1]; 1 is full fidelity
            (the data and fold scheme the final choice uses). Scores are compared only between
            nodes of one fidelity (:mod:`mcgs.fidelity`).
        peak_rss_mb: The program's largest resident memory, MiB (None: not measured).
        gpu: Index of the GPU it was handed (None: it ran on the CPU).
        peak_gpu_mb: The most GPU memory its processes held, MiB (nvidia-smi, sampled every
            few seconds; None without a GPU).
    """

    id: int
    seq: int
    parent_id: int | None
    operator: Operator
    state: NodeState
    plan: str = ""
    code: str = ""
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    score: float | None = None
    reward: float | None = None
    error: str | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    runtime_s: float | None = None
    knowledge_ids: tuple[str, ...] = ()
    created_at: _dt.datetime | None = None
    finished_at: _dt.datetime | None = None
    workspace: str | None = None
    depth: int = 0
    review: dict[str, Any] = dataclasses.field(default_factory=dict)
    owner: str | None = None
    attempts: int = 0
    role: NodeRole = NodeRole.CANDIDATE
    fidelity: float = 1.0
    peak_rss_mb: float | None = None
    gpu: int | None = None
    peak_gpu_mb: float | None = None

    @property
    def is_valid(self) -> bool:
        return self.state is NodeState.VALID and self.score is not None

    @property
    def full_fidelity(self) -> bool:
        """Whether the node ran on the full data (its score may be compared with the final
        choice's candidates)."""
        return self.fidelity >= 1.0


@dataclasses.dataclass(frozen=True)
class FrozenEdge:
    """Immutable snapshot of a typed edge ``src -> dst``."""

    src: int
    dst: int
    kind: EdgeKind
    operator: Operator
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
