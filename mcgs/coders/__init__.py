"""Coders: who writes a candidate program (DESIGN §5).

A coder turns a :class:`CoderRequest` (operator, task, data profile, parent node and its
outcome, siblings, knowledge entries, budget) into a :class:`CoderAnswer` (plan, code,
structured config, knowledge ids). The offline :class:`~mcgs.coders.recipe.RecipeCoder` is the
default; :class:`~mcgs.coders.anthropic.AnthropicCoder` asks Claude behind the same protocol.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
from typing import Any, Mapping, Protocol, runtime_checkable

from mcgs.node import FrozenNode, Operator
from mcgs.task import TaskSpec

__all__ = ["CoderRequest", "CoderAnswer", "Coder", "CoderStop", "config_key", "program_key", "ENGINE_KEYS"]


# config fields that do not make a program different: the seed (a re-roll of the same program,
# which seed averaging does on purpose), the coder's note of what it changed, who wrote it (a
# recipe program written as an LLM's fallback is the recipe coder's program), and which
# interrupted node a queued copy tries again
#: Config keys the engine writes about a node, never inherited by a node built from it: the
#: interrupted node a retry copies, the low-fidelity node a promotion runs again (mcgs.fidelity),
#: the mark of a rescue draft (operators/draft.py: rescue_answer).
ENGINE_KEYS = frozenset({"retry_of", "promoted_from", "rescue"})
_NOT_IDENTITY = frozenset({"seed", "change", "author"}) | ENGINE_KEYS


def config_key(config: Mapping[str, Any] | None) -> str | None:
    """What identifies a program by its structured config: the config as canonical JSON
    without ``seed``, ``change``, ``author`` and the engine's :data:`ENGINE_KEYS`; None for a node without a config (the root, a program
    without structure). Two nodes with the same key run the same program up to its seed.

    A config that records its program's :func:`program_key` (``program``: the LLM coder's,
    whose programs have no structured config) is keyed by that alone; the model that wrote
    the program and the expert plan it followed do not make it a different program."""
    if not config:
        return None
    if config.get("program"):
        return f"program:{config['program']}"
    return json.dumps({k: v for k, v in config.items() if k not in _NOT_IDENTITY}, sort_keys=True, default=str)


def program_key(code: str) -> str | None:
    """SHA-256 (hex) of the program's syntax tree (:func:`ast.dump`), so comments, blank lines
    and formatting do not make a program new (strings and docstrings do); None when the code
    does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


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
        tried: :func:`config_key` of every node of the graph that has a config -> the sequence
            number of the first node with it. A coder should not propose one of these again:
            the engine would rerun a program whose result it already has.
        move_gains: For Improve: what each kind of change has gained so far in this run,
            ``"<model> <change>"`` (e.g. ``"model.lightgbm param:num_leaves:up"``) -> ``(tries,
            mean gain)``, the gain being a child's relative score improvement over its parent
            (0 when it did not improve or failed); ``"*"`` is every change together
            (:func:`operators.improve.observed_gains`).
        family_scores: For Improve: the best valid score of each model entry in the run at the
            parent's fidelity (ensembles not counted), so a coder knows how a family it might
            switch to has done on this data.
        costs: For Improve: the run's cost model, calibrated on its finished nodes
            (:class:`mcgs.cost_model.CostModel`), so a coder can weigh a change's expected gain
            by its predicted seconds; None when not given.
        experience: What earlier runs on similar data say (:class:`mcgs.experience.Experience`:
            families in the order they ranked, the configuration each won with, failures);
            None when the run has none.
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
    tried: Mapping[str, int] = dataclasses.field(default_factory=dict)
    move_gains: Mapping[str, tuple[int, float]] = dataclasses.field(default_factory=dict)
    family_scores: Mapping[str, float] = dataclasses.field(default_factory=dict)
    costs: Any = None
    experience: Any = None


@dataclasses.dataclass(frozen=True)
class CoderAnswer:
    """A coder's answer: the plan text, the program, its structured config and the
    knowledge entries it was built from; ``ledger_ids`` are the cost-ledger rows of the calls
    that wrote it (an LLM coder's), which the engine labels with the node they became."""

    plan: str
    code: str
    config: dict[str, Any]
    knowledge_ids: tuple[str, ...] = ()
    ledger_ids: tuple[int, ...] = ()


@runtime_checkable
class Coder(Protocol):
    """Anything that writes programs for the operators."""

    name: str

    def write(self, request: CoderRequest) -> CoderAnswer:
        """Return a program for the request. Must not raise for ordinary failures of the
        parent program; raises only on programming errors."""
        ...
