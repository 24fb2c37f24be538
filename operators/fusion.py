"""Fusion: merge a stagnant branch's best node with the best nodes of 1-2 other branches
(at most 5 references), AutoMLGen's cross-branch fusion (DESIGN §4).

Every input — the primary parent and each reference — is stored as a ``fuses`` edge, so
Fusion nodes have at least two incoming ``fuses`` edges and their reward is credited back to
the branches they drew on."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import EdgeKind, Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a fusion of ``exp.parent_id`` with the nodes in ``exp.references`` (best first)."""
    return ctx.request(exp, Operator.FUSION)


def edges(exp: Expansion) -> list[tuple[int, EdgeKind, dict]]:
    """A ``fuses`` edge from the primary parent and from each reference (each input once)."""
    return [(i, EdgeKind.FUSES, {}) for i in dict.fromkeys([exp.parent_id, *exp.references])]
