"""Engine-side ensembling of valid nodes and the choice of the final submission.

Every valid node has OOF and test predictions on the same folds, so the engine can combine
them itself (DESIGN §4). Weights are chosen by greedy forward selection with replacement
(Caruana, Niculescu-Mizil, Crew & Ksikes, *Ensemble Selection from Libraries of Models*,
ICML 2004): start empty, repeatedly add the member (repeats allowed) that most improves the
ensemble's OOF score, and keep the best prefix. The selection criterion is the task metric,
except that metrics computed on hard labels (accuracy, F1) are replaced by log loss (or, for
regression, by the metric itself), because a step function of the weights gives greedy
selection nothing to climb.

The final submission follows the one-standard-error rule (Breiman, Friedman, Olshen & Stone,
*Classification and Regression Trees*, 1984; Hastie, Tibshirani & Friedman, *ESL* §7.10):
the ensemble is preferred to the single best node unless it is worse by more than one standard
error of the best node's fold scores, since differences inside the noise of CV do not justify
the higher-variance choice.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from mcgs.evaluation import score_predictions
from mcgs.metrics import get_metric
from mcgs.task import TaskSpec

__all__ = [
    "EnsembleSelection",
    "greedy_selection",
    "fold_standard_error",
    "selection_score",
    "render_ensemble_program",
    "render_stacking_program",
]


@dataclasses.dataclass(frozen=True)
class EnsembleSelection:
    """Result of greedy selection.

    Attributes:
        weights: member id -> number of times chosen (weight = count / total).
        criterion: Name of the selection criterion (the task metric or its surrogate).
        criterion_value: The ensemble's value of that criterion on the OOF rows.
    """

    weights: dict[int, int]
    criterion: str
    criterion_value: float


def selection_score(spec: TaskSpec, y_true: np.ndarray, pred: np.ndarray) -> tuple[str, float, bool]:
    """Score used to select ensemble members: ``(name, value, higher_is_better)``."""
    metric = get_metric(spec.metric)
    if spec.task_kind in ("binary", "multiclass") and not metric.needs_proba:
        surrogate = spec.model_copy(update={"metric": "log_loss", "higher_is_better": False})
        return "log_loss", score_predictions(surrogate, y_true, pred), False
    return spec.metric, score_predictions(spec, y_true, pred), spec.higher_is_better


def greedy_selection(
    spec: TaskSpec,
    y_true: np.ndarray,
    oofs: Mapping[int, np.ndarray],
    *,
    max_steps: int = 25,
) -> EnsembleSelection:
    """Greedy forward selection with replacement over OOF predictions (Caruana et al. 2004).

    Args:
        spec: The task (metric, kind).
        y_true: Labels of the validated rows, shape (n,) or (n, n_targets).
        oofs: member id -> OOF predictions aligned to ``y_true``, shape (n, n_cols).
        max_steps: Number of additions tried; the best prefix is kept.

    Returns:
        The selection.

    Raises:
        ValueError: no members.
    """
    if not oofs:
        raise ValueError("greedy_selection needs at least one member")
    ids = list(oofs)
    total = None
    chosen: list[int] = []
    best_prefix: tuple[float, list[int]] | None = None
    name = spec.metric
    higher = spec.higher_is_better
    for _ in range(max_steps):
        step_best = None
        for m in ids:
            cand = oofs[m] if total is None else (total + oofs[m])
            name, value, higher = selection_score(spec, y_true, cand / (len(chosen) + 1))
            if step_best is None or (value > step_best[0] if higher else value < step_best[0]):
                step_best = (value, m)
        value, m = step_best
        chosen.append(m)
        total = oofs[m].copy() if total is None else total + oofs[m]
        if best_prefix is None or (value > best_prefix[0] if higher else value < best_prefix[0]):
            best_prefix = (value, list(chosen))
    weights: dict[int, int] = {}
    for m in best_prefix[1]:
        weights[m] = weights.get(m, 0) + 1
    return EnsembleSelection(weights=weights, criterion=name, criterion_value=float(best_prefix[0]))


def fold_standard_error(spec: TaskSpec, y_true: np.ndarray, pred: np.ndarray, folds: np.ndarray) -> float:
    """Standard error of the task metric across folds: ``std(fold scores, ddof=1) / sqrt(k)``.

    Args:
        y_true, pred: Labels and predictions of the validated rows.
        folds: Fold of each of those rows, shape (n,).
    """
    scores = [score_predictions(spec, y_true[folds == k], pred[folds == k]) for k in np.unique(folds)]
    if len(scores) < 2:
        return 0.0
    return float(np.std(scores, ddof=1) / np.sqrt(len(scores)))


def render_ensemble_program(members: Mapping[str, int], plan: str) -> str:
    """The ensemble node's program: blends members' prediction files with fixed weights.

    Args:
        members: member workspace (relative to the ensemble's workspace) -> weight.
        plan: Text placed in the docstring.
    """
    return _render("ensemble.py.j2", "mcgs ensemble node", repr(dict(members)), plan)


def _render(template: str, title: str, members: str, plan: str) -> str:
    from mcgs.contract import CONTRACT_VERSION
    from mcgs.knowledge_base import template_environment

    return template_environment().get_template(template).render(title=title, plan=plan, members=members, contract_version=CONTRACT_VERSION)


def render_stacking_program(members: list[str], plan: str) -> str:
    """The program of a stacking ensemble node (``ensemble_method="stacking"``): a
    second-level model on the members' OOF predictions, cross-validated on the task's folds.

    Args:
        members: member workspaces, relative to the ensemble's workspace.
        plan: Text placed in the docstring.
    """
    return _render("stacking.py.j2", "mcgs stacking node", repr(list(members)), plan)
