"""A metric's direction, the one place where two scores are compared.

Each task fixes its metric's direction once (``TaskSpec.higher_is_better``, from
:mod:`mcgs.metrics`); every comparison of scores, sort and choice of a best node in the engine
goes through these two functions, so no part can flip it.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["better", "best_first", "best_of"]


def better(a: float, b: float, higher_is_better: bool) -> bool:
    """Whether score ``a`` is strictly better than ``b``."""
    return a > b if higher_is_better else a < b


def best_first(score: float, higher_is_better: bool) -> float:
    """A sort key that puts better scores first in an ascending sort (``-score`` when higher
    is better); pair it with the node number to break ties by age."""
    return -score if higher_is_better else score


def best_of(scores: Iterable[float], higher_is_better: bool) -> float:
    """The best of ``scores`` (which must not be empty)."""
    return max(scores) if higher_is_better else min(scores)
