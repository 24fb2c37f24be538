"""Evolve: a new node for a stagnant branch, written from the branch's own trajectory — what
was tried on it and which changes helped (DESIGN §4; MLEvolve's trajectory-aware evolution).

The branch history travels as ``references`` edges, so the graph records what the new node was
built from."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an evolution of the branch best ``exp.parent_id``; ``exp.references`` are the
    branch's other finished nodes, in creation order."""
    return ctx.request(exp, Operator.EVOLVE)
