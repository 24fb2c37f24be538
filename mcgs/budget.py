"""A run's budgets, checked in one place before each expansion: wall time and nodes.

The wall-clock budget counts across sittings (the time stored with the run, plus this
sitting's, minus pauses for a full disk); the last ``ensemble_reserve_s`` (at most 10 %) is kept
for the final ensemble. The node budget counts finished search nodes plus the ones claimed by
any process, so parallel workers never overshoot it (DESIGN §1, STYLE "budgets are checked in
one place"). The LLM dollar budget is the coder's (:mod:`mcgs.llm`): a coder that runs out
raises :class:`mcgs.coders.CoderStop`, which the search records as :attr:`StopReason.CODER`.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Any, Callable, Iterable

from mcgs.node import FrozenNode, NodeState, Operator

__all__ = ["StopReason", "Clock", "Budget", "MIN_CANDIDATE_S"]

#: Below this many seconds of remaining budget (after the ensemble reserve) no candidate starts.
MIN_CANDIDATE_S = 5.0


class StopReason(str, enum.Enum):
    """Why a search stopped starting candidates. The values are what the run summary prints."""

    TIME = "time budget spent"
    NODES = "node budget spent"
    CODER = "the coder stopped"  # the LLM budget: the coder's own message says more


@dataclasses.dataclass
class Clock:
    """Wall-clock budget accounting across sittings.

    Attributes:
        budget_s: The run's total wall budget, seconds.
        elapsed_before: Seconds spent in earlier sittings (stored with the run).
        started: ``time.monotonic()`` when this sitting started.
        paused_s: Seconds paused in this sitting (a full disk): not charged.
    """

    budget_s: float
    elapsed_before: float
    started: float = dataclasses.field(default_factory=time.monotonic)
    paused_s: float = 0.0

    @property
    def elapsed(self) -> float:
        """Seconds of budget spent so far, all sittings together."""
        return self.elapsed_before + (time.monotonic() - self.started) - self.paused_s

    @property
    def remaining(self) -> float:
        """Seconds of budget left (never negative)."""
        return max(0.0, self.budget_s - self.elapsed)

    @property
    def progress(self) -> float:
        """Share of the budget spent, in [0, 1]."""
        return min(1.0, self.elapsed / self.budget_s)


class Budget:
    """The run's time and node budgets.

    Args:
        settings: Returns the run's settings now (``time_budget_s``, ``max_nodes``,
            ``ensemble``, ``ensemble_reserve_s``, ``node_limit_s``): a caller may replace them
            while the run is open.
        elapsed_before: Seconds spent in earlier sittings.
    """

    def __init__(self, settings: Callable[[], Any], elapsed_before: float):
        self._settings = settings
        self.clock = Clock(settings().time_budget_s, elapsed_before)

    @property
    def settings(self):
        return self._settings()

    def take_time_budget(self) -> None:
        """Set the clock's total from the settings (a resume given another budget); what was
        spent stays spent."""
        self.clock.budget_s = self.settings.time_budget_s

    @property
    def reserve_s(self) -> float:
        """Seconds kept at the end for the final ensemble: ``min(ensemble_reserve_s, 10 % of
        the budget)``, or 0 without ensembles."""
        if not self.settings.ensemble:
            return 0.0
        return min(self.settings.ensemble_reserve_s, 0.1 * self.clock.budget_s)

    def node_timeout(self) -> float:
        """Seconds a candidate started now may run: its own limit, or what is left before the
        reserve, whichever is less (may be below 1; the sandbox runs at least 1 s)."""
        return min(self.settings.node_limit_s, self.clock.remaining - self.reserve_s)

    def time_spent(self) -> bool:
        """Whether too little time is left for another candidate (:data:`MIN_CANDIDATE_S`)."""
        return self.clock.remaining - self.reserve_s < MIN_CANDIDATE_S

    def exhausted(self, nodes: Callable[[], Iterable[FrozenNode]], in_flight: int = 0) -> StopReason | None:
        """Why no new candidate may start, or None.

        Args:
            nodes: Returns the run's nodes as stored now (called only for a node budget).
            in_flight: Candidates this process runs now; they count against the node budget,
                as do nodes claimed by other processes.
        """
        if self.time_spent():
            return StopReason.TIME
        if self.settings.max_nodes is not None:
            search_nodes = [n for n in nodes() if n.operator not in (Operator.ROOT, Operator.ENSEMBLE)]
            done = sum(1 for n in search_nodes if n.state.is_finished())
            # claimed by any process (this one's workers, `mcgs worker`s): they will finish too
            claimed = sum(1 for n in search_nodes if n.state is NodeState.RUNNING or (n.state is NodeState.PENDING and n.owner))
            if done + max(in_flight, claimed) >= self.settings.max_nodes:
                return StopReason.NODES
        return None
