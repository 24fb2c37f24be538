"""Aggregate: on global stagnation with two good branches or more, a new root-level node that
merges the branch bests (DESIGN §4). It heads a new branch; each branch best is a ``fuses``
edge into it."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import EdgeKind, Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an aggregation of the branch bests in ``exp.references`` (best first); the
    primary parent is the root, which holds no program."""
    return ctx.request(exp, Operator.AGGREGATE, with_parent=False)


def edges(exp: Expansion) -> list[tuple[int, EdgeKind, dict]]:
    """A ``fuses`` edge from each branch best it merges (its primary parent is the root)."""
    return [(i, EdgeKind.FUSES, {}) for i in dict.fromkeys(exp.references)]
