"""Improve: a child of a valid node that changes one thing, escalating by tier
(parameters -> features -> strategy) as the branch's patience runs out."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an improvement of ``exp.parent_id`` at tier ``exp.tier``; siblings are passed
    so the coder does not repeat a change already tried."""
    return ctx.request(exp, Operator.IMPROVE)
