"""Debug: fix a failed node (error, timeout, memory, invalid output) given its outcome."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a fix of ``exp.parent_id``; its lineage lets the coder fall back to the last
    valid program of the chain."""
    return ctx.request(exp, Operator.DEBUG)
