"""Aggregate: on global stagnation with two good branches or more, a new root-level node that
merges the branch bests (DESIGN §4). It heads a new branch.

* **When** (:func:`propose`, graph policies only; asked before UCT's descent): the last
  ``global_stagnation`` finished refinement nodes set no new global best
  (:func:`mcgs.branches.is_globally_stagnant`), at least two branches have a valid node, and no
  Aggregate was made among the last ``global_stagnation`` search nodes (once per spell).
* **Request** (:func:`build_request`): no parent program (the primary parent is the root); the
  branch bests (best first, at most 5) as references.
* **Edges** (:func:`edges`): a ``fuses`` edge from each branch best it merges.
* **Prompt**: ``operators/prompts/aggregate.j2``.
* **Recipe step**: Fusion's merge (:func:`mcgs.operators.fusion.recipe_step`) over the
  references alone.
"""

from __future__ import annotations

import networkx as nx

from mcgs.branches import Expansion, good_branches, is_globally_stagnant
from mcgs.coders import CoderRequest
from mcgs.graph import newest_first, root_of
from mcgs.node import EdgeKind, Operator
from mcgs.operators.context import OperatorContext
from mcgs.operators.fusion import recipe_foreign, recipe_step
from mcgs.settings import SearchSettings

__all__ = ["OPERATOR", "PROMPT", "MAX_INPUTS", "propose", "build_request", "edges", "recipe_step", "recipe_foreign"]

#: The operator this module implements.
OPERATOR = Operator.AGGREGATE
#: The LLM prompt template of this operator, in ``operators/prompts/``.
PROMPT = "aggregate.j2"
#: Branch bests merged by one Aggregate node.
MAX_INPUTS = 5


def propose(g: nx.DiGraph, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    """An aggregation of the branch bests at the root when the module's *When* holds, else None."""
    if not is_globally_stagnant(g, s):
        return None
    bests = good_branches(g, higher_is_better)
    if len(bests) < 2:
        return None
    recent = []  # the last global_stagnation search nodes (finished or not)
    for n in newest_first(g):
        if n.operator not in (Operator.ROOT, Operator.ENSEMBLE):
            recent.append(n)
            if len(recent) == s.global_stagnation:
                break
    if any(n.operator is Operator.AGGREGATE for n in recent):
        return None
    refs = tuple(b.id for b in bests[:MAX_INPUTS])
    return Expansion(root_of(g), Operator.AGGREGATE, reason=f"aggregate: no new best in the last {s.global_stagnation} nodes; merge the bests of {len(refs)} branches", references=refs)


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an aggregation of the branch bests in ``exp.references`` (best first); the
    primary parent is the root, which holds no program."""
    return ctx.request(exp, Operator.AGGREGATE, with_parent=False)


def edges(exp: Expansion) -> list[tuple[int, EdgeKind, dict]]:
    """A ``fuses`` edge from each branch best it merges (its primary parent is the root)."""
    return [(i, EdgeKind.FUSES, {}) for i in dict.fromkeys(exp.references)]
