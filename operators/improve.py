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
    return CoderRequest(
        operator=Operator.IMPROVE,
        task=ctx.task,
        profile=ctx.profile,
        parent=ctx.node(exp.parent_id),
        siblings=ctx.siblings(exp.parent_id),
        lineage=ctx.lineage(exp.parent_id),
        tier=exp.tier,
        seed=ctx.seed,
        per_run_timeout_s=ctx.settings.per_run_timeout_s,
        reason=exp.reason,
    )
