"""Draft: a new branch from the root, from a knowledge entry that no other draft used."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a draft; the existing drafts are passed as siblings so the coder diversifies."""
    return ctx.request(exp, Operator.DRAFT, with_parent=False)
