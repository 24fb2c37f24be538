"""Coders: who writes a candidate program (DESIGN §5).

A coder turns a :class:`CoderRequest` (operator, task, data profile, parent node and its
outcome, siblings, knowledge entries, budget) into a :class:`CoderAnswer` (plan, code,
structured config, knowledge ids). The offline :class:`~mcgs.coders.recipe.RecipeCoder` is the
default; :class:`~mcgs.coders.anthropic.AnthropicCoder` asks Claude behind the same protocol.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from mcgs.node import FrozenNode, Operator
from mcgs.task import TaskSpec

__all__ = ["CoderRequest", "CoderAnswer", "Coder", "CoderStop"]


class CoderStop(RuntimeError):
    """The coder asks the run to stop (e.g. its spending limit is reached and the settings say
    stop); the search builds its final ensemble and finishes."""


@dataclasses.dataclass(frozen=True)
class CoderRequest:
    """What an operator asks a coder for.

    Attributes:
        operator: DRAFT, DEBUG, IMPROVE, EVOLVE, FUSION or AGGREGATE.
        task: The task.
        profile: Data profile (:func:`mcgs.profile.profile_task`).
        parent: The primary parent (None for a draft).
        siblings: The parent's existing primary children (to avoid repeating them).
        lineage: Primary ancestors of the parent, nearest first (Debug falls back on them).
        tier: Improve tier: 0 parameters, 1 features, 2 strategy.
        seed: Seed for this node's program.
        per_run_timeout_s: Time limit the program will get, seconds.
        reason: Why the policy chose this expansion.
        references: Other nodes the operator reads: Fusion's and Aggregate's inputs (best
            first), or the branch history Evolve learns from (in creation order).
        node_seq: Sequence number the new node will get (for the cost ledger).
    """

    operator: Operator
    task: TaskSpec
    profile: dict[str, Any]
    parent: FrozenNode | None = None
    siblings: tuple[FrozenNode, ...] = ()
    lineage: tuple[FrozenNode, ...] = ()
    tier: int = 0
    seed: int = 0
    per_run_timeout_s: float = 300.0
    reason: str = ""
    references: tuple[FrozenNode, ...] = ()
    node_seq: int | None = None


@dataclasses.dataclass(frozen=True)
class CoderAnswer:
    """A coder's answer: the plan text, the program, its structured config and the
    knowledge entries it was built from."""

    plan: str
    code: str
    config: dict[str, Any]
    knowledge_ids: tuple[str, ...] = ()


@runtime_checkable
class Coder(Protocol):
    """Anything that writes programs for the operators."""

    name: str

    def write(self, request: CoderRequest) -> CoderAnswer:
        """Return a program for the request. Must not raise for ordinary failures of the
        parent program; raises only on programming errors."""
        ...
