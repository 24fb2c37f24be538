"""Engine-side ensembling of valid nodes and the choice of the final submission.

Every valid node has OOF and test predictions on the same folds, so the engine can combine
them itself (DESIGN §4). Weights are chosen by greedy forward selection with replacement
(Caruana, Niculescu-Mizil, Crew & Ksikes, *Ensemble Selection from Libraries of Models*,
ICML 2004): start empty, repeatedly add the member (repeats allowed) that most improves the
ensemble's OOF score, and keep the best prefix. The selection criterion is the task metric,
except that metrics computed on hard labels (accuracy, F1) are replaced by log loss (or, for
regression, by the metric itself), because a step function of the weights gives greedy
selection nothing to climb. For squared-error regression metrics, the few rows the members' median
misses by far (gross errors, :func:`gross_error_rows`) are left out of the selection, not of
the score.

The final submission follows the one-standard-error rule (Breiman, Friedman, Olshen & Stone,
*Classification and Regression Trees*, 1984; Hastie, Tibshirani & Friedman, *ESL* §7.10):
the ensemble is preferred to the single best node unless it is worse by more than one standard
error of the best node's fold scores, since differences inside the noise of CV do not justify
the higher-variance choice. The slack goes only to an ensemble built after the best node (one
whose selection could have used it): an ensemble built earlier in the search combines an older
pool, and its being close to the best node says nothing in its favour, so it must be at least as
good to be handed in (:func:`choose_final`).

For probability outputs two refinements are tried on the same OOF rows: blending in log-odds /
log-probability space (a weighted geometric mean, renormalised) besides the arithmetic mean, and
one temperature on the blend's logits (temperature scaling, Guo, Pleiss, Sun & Weinberger, *On
Calibration of Modern Neural Networks*, ICML 2017). Regularised linear models on many classes are
under-confident, and a flat member pulls a confident blend towards uniform; both cost log loss
that neither the arithmetic mean nor the member weights can recover. The variant (and the
temperature) is kept only when it improves the selection criterion.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, Sequence

import numpy as np

from mcgs.evaluation import normalised_probabilities, positive_labels, score_predictions
from mcgs.metrics import get_metric
from mcgs.node import NodeRole
from mcgs.settings import setting_default
from mcgs.task import TaskSpec

__all__ = [
    "EnsembleSelection",
    "greedy_selection",
    "select_ensemble",
    "blend_predictions",
    "choose_final",
    "FINAL_ENSEMBLE_TAG",
    "honest_score",
    "fold_standard_error",
    "second_level_folds",
    "gross_error_rows",
    "GROSS_ERROR_SD",
    "nested_ensemble_score",
    "selection_criterion",
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
        blend: ``mean`` (weighted arithmetic mean of the predictions) or ``geometric`` (weighted
            mean of log-probabilities / log-odds, mapped back by softmax / sigmoid).
        temperature: Divides the blend's logits before the final softmax / sigmoid (1.0 = none).
        excluded_rows: OOF rows left out of the selection as gross errors
            (:func:`gross_error_rows`); ``criterion_value`` is computed without them.
    """

    weights: dict[int, int]
    criterion: str
    criterion_value: float
    blend: str = "mean"
    temperature: float = 1.0
    excluded_rows: int = 0


# Probability floor before taking logs (geometric blend, temperature). With 1e-6, a member
# that gives a hard 0 (k-nearest neighbours with small k) contributes log(1e-6) = -13.8 to the
# blend: the weights and temperature fitted on the OOF rows then fail badly on new rows. On the
# ablation's leaf-classification runs (commit e65e957, 3 seeds x 3 policies) the held-out log
# loss of such ensembles was 0.116-0.168 against 0.045-0.094 with a floor of 1e-3, which also
# keeps the arithmetic blend there (the geometric one no longer wins on the OOF rows).
_EPS = 1e-3


def _probabilistic(spec: TaskSpec) -> bool:
    """True when the predictions are probabilities (classification with a probability layout)."""
    return spec.task_kind in ("binary", "multiclass", "multilabel")


def _to_logits(spec: TaskSpec, p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _EPS, 1 - _EPS)
    if spec.task_kind == "multiclass":
        return np.log(p)
    return np.log(p) - np.log1p(-p)  # binary / multilabel: one log-odds per column


def _from_logits(spec: TaskSpec, z: np.ndarray) -> np.ndarray:
    if spec.task_kind == "multiclass":
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return 1.0 / (1.0 + np.exp(-z))


def blend_predictions(spec: TaskSpec, preds: list[np.ndarray], weights: list[float], blend: str = "mean", temperature: float = 1.0) -> np.ndarray:
    """Weighted blend of members' predictions, as the ensemble node's program computes it.

    Args:
        spec: The task (its kind decides softmax or sigmoid).
        preds: Member predictions, each of shape (n, n_cols), in contract column layout.
        weights: Non-negative weights, one per member (normalised here).
        blend: ``mean`` or ``geometric`` (probability outputs only).
        temperature: Logit divisor applied after blending (probability outputs only).

    Returns:
        Array of shape (n, n_cols).
    """
    w = np.asarray(weights, dtype=float) / float(np.sum(weights))
    if blend == "geometric" or temperature != 1.0:
        if not _probabilistic(spec):
            raise ValueError(f"blend={blend!r}, temperature={temperature} need probability outputs; task kind is {spec.task_kind}")
        if blend == "geometric":
            z = sum(wi * _to_logits(spec, p) for wi, p in zip(w, preds))
        else:
            z = _to_logits(spec, sum(wi * p for wi, p in zip(w, preds)))
        return _from_logits(spec, z / temperature)
    return sum(wi * p for wi, p in zip(w, preds))


def selection_score(spec: TaskSpec, y_true: np.ndarray, pred: np.ndarray) -> tuple[str, float, bool]:
    """Score used to select ensemble members: ``(name, value, higher_is_better)``.

    One call; a selection loop should prepare the labels once with :func:`selection_criterion`.
    """
    name, score, higher = selection_criterion(spec, y_true)
    return name, score(pred), higher


def selection_criterion(spec: TaskSpec, y_true: np.ndarray) -> tuple[str, Callable[[np.ndarray], float], bool]:
    """The criterion ensemble selection optimises, prepared once for the labels ``y_true``:
    ``(name, score(pred) -> float, higher_is_better)``.

    The task metric, except that metrics on hard labels (accuracy, F1) of classification tasks
    are replaced by log loss, which is smooth in the blend weights. The labels are encoded once
    (selection scores hundreds of blends of the same rows), and the two criteria selection meets
    most are computed directly from their definitions: binary ROC AUC as the Mann-Whitney
    statistic of tie-averaged ranks (``scipy.stats.rankdata``; equal to scikit-learn's
    trapezoidal AUC, Hanley & McNeil 1982), log loss of clipped, renormalised probabilities
    (as ``score_predictions`` and scikit-learn compute it), and RMSE, RMSLE and MAE (per target
    column, then averaged, which is also MLE-bench's mean column-wise RMSLE). Every other metric goes through
    :func:`mcgs.evaluation.score_predictions`. ``tests/test_ensemble.py`` checks both fast paths
    against scikit-learn.

    Args:
        spec: The task.
        y_true: Labels of the rows, shape (n,) or (n, n_targets), as the engine holds them.

    Returns:
        ``(name, score, higher_is_better)``; ``score`` takes predictions in contract layout,
        shape (n, n_cols).
    """
    metric = get_metric(spec.metric)
    name, higher = spec.metric, spec.higher_is_better
    if spec.task_kind in ("binary", "multiclass") and not metric.needs_proba:
        name, higher = "log_loss", False
    if spec.task_kind == "binary" and name in ("roc_auc", "log_loss"):
        y = positive_labels(spec, y_true).astype(bool)
        n_pos, n_neg = int(y.sum()), int((~y).sum())
        if name == "roc_auc" and n_pos and n_neg:
            from scipy.stats import rankdata

            def auc(pred: np.ndarray) -> float:
                ranks = rankdata(pred[:, 0])
                return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))

            return name, auc, higher
        if name == "log_loss":
            eps = np.finfo(float).eps

            def binary_log_loss(pred: np.ndarray) -> float:
                p = np.clip(pred[:, 0], eps, 1 - eps)
                return float(-np.mean(np.where(y, np.log(p), np.log1p(-p))))

            return name, binary_log_loss, higher
    if spec.task_kind == "multiclass" and name == "log_loss" and spec.class_labels:
        labels = [str(c) for c in spec.class_labels]
        index = {c: i for i, c in enumerate(labels)}
        idx = np.fromiter((index[str(v)] for v in y_true), dtype=int, count=len(y_true))
        rows = np.arange(len(idx))
        eps = np.finfo(float).eps

        def multiclass_log_loss(pred: np.ndarray) -> float:
            p = normalised_probabilities(pred)
            return float(-np.mean(np.log(np.clip(p[rows, idx], eps, 1 - eps))))

        return name, multiclass_log_loss, higher
    if spec.task_kind in ("regression", "multi_target_regression") and name in ("rmse", "rmsle", "mean_column_rmsle", "mae", "mse"):
        log = name in ("rmsle", "mean_column_rmsle")
        yt = np.asarray(y_true, dtype=float).reshape(len(y_true), -1)
        if log:
            yt = np.log1p(yt)

        def regression(pred: np.ndarray) -> float:  # mean over target columns, as score_predictions
            p = np.log1p(np.clip(pred, 0, None)) if log else pred
            err = p - yt
            if name == "mae":
                per_column = np.abs(err).mean(axis=0)
            else:
                per_column = (err**2).mean(axis=0) if name == "mse" else np.sqrt((err**2).mean(axis=0))
            return float(per_column.mean())

        return name, regression, higher
    target = spec if name == spec.metric else spec.model_copy(update={"metric": name, "higher_is_better": higher})
    return name, (lambda pred: score_predictions(target, y_true, pred)), higher


# Robust z-score (residual of the members' median / 1.4826 MAD) beyond which a row of a squared-
# error regression metric is left out of ensemble selection (gross_error_rows); one number, the
# setting's default.
GROSS_ERROR_SD = setting_default("ensemble_gross_error_sd")
_SQUARED_ERROR_METRICS = frozenset({"rmse", "rmsle", "mean_column_rmsle"})


def gross_error_rows(spec: TaskSpec, y_true: np.ndarray, oofs: Mapping[int, np.ndarray], threshold: float | None = GROSS_ERROR_SD) -> np.ndarray | None:
    """Rows whose label the pool's consensus misses by far: the rows ensemble *selection* leaves out.

    For regression tasks scored by a squared error (RMSE, RMSLE, mean column-wise RMSLE), the
    consensus of the pool is the row-wise median of the members' OOF predictions (on the log1p
    scale for the log metrics). A row is a gross error when, in some target column, its residual
    from that consensus is more than ``threshold`` robust standard deviations from the residuals'
    median (scale: 1.4826 x median absolute deviation, the normal-consistent MAD; Hampel 1974,
    Rousseeuw & Croux 1993). Leaving such rows out of the fit is trimmed least squares
    (Rousseeuw 1984) applied to the blend weights.

    Why: a squared error lets two or three rows decide the weights. On house prices two partial
    sales (over 4 000 sq ft sold for under 200 000; residuals 12-22 robust SDs) made up a fifth
    of the lasso's OOF squared error and pulled the blend to half LightGBM; without them the
    selection gives the lasso about two thirds: on the 10 % holdout of 12 stored runs the final
    ensemble's RMSLE went from 0.1079-0.1090 to 0.1049-0.1058, and its cross-fitted score on every
    row improved in all 12 (``docs/search.md``, "Ensembles"). Only the selection
    changes: the ensemble's own OOF and cross-fitted scores, and every comparison with single
    nodes, still use the task metric on every row.

    Args:
        spec: The task.
        y_true: Labels of the rows, shape (n,) or (n, n_targets).
        oofs: Member id -> OOF predictions aligned to ``y_true``, each (n, n_targets).
        threshold: Robust z beyond which a row is a gross error; None or 0 disables.

    Returns:
        Boolean mask, shape (n,), True for rows to *keep*; None when nothing is left out (other
        task kinds or metrics, fewer than 20 rows, a zero MAD, no row beyond the
        threshold, or more than 1 % of the rows beyond it: then the tail is the data's, not a
        few bad labels).
    """
    if not threshold or spec.task_kind not in ("regression", "multi_target_regression") or spec.metric not in _SQUARED_ERROR_METRICS:
        return None
    n = len(y_true)
    if n < 20 or not oofs:
        return None
    log = spec.metric != "rmse"
    y = np.asarray(y_true, dtype=float).reshape(n, -1)
    preds = np.stack([np.asarray(p, dtype=float).reshape(n, -1) for p in oofs.values()])
    if log:
        y, preds = np.log1p(np.clip(y, 0, None)), np.log1p(np.clip(preds, 0, None))
    resid = y - np.median(preds, axis=0)
    centred = resid - np.median(resid, axis=0)
    scale = 1.4826 * np.median(np.abs(centred), axis=0)
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        return None
    gross = (np.abs(centred) / scale > threshold).any(axis=1)
    if not gross.any() or gross.sum() > 0.01 * n:
        return None
    return ~gross


def greedy_selection(
    spec: TaskSpec,
    y_true: np.ndarray,
    oofs: Mapping[int, np.ndarray],
    *,
    max_steps: int = 25,
    blend: str = "mean",
    patience: int = 6,
    gross_error_sd: float | None = GROSS_ERROR_SD,
) -> EnsembleSelection:
    """Greedy forward selection with replacement over OOF predictions (Caruana et al. 2004).

    Args:
        spec: The task (metric, kind).
        y_true: Labels of the validated rows, shape (n,) or (n, n_targets).
        oofs: member id -> OOF predictions aligned to ``y_true``, shape (n, n_cols).
        max_steps: Number of additions tried at most; the best prefix is kept.
        patience: Stop after this many additions in a row that did not improve the best prefix
            (later additions only re-weight members the prefix already has; the ensemble and its
            cross-fitted estimate run the selection several times, so it should be cheap).
        blend: ``mean``, or ``geometric`` (members averaged as log-probabilities / log-odds;
            probability outputs only).
        gross_error_sd: Rows :func:`gross_error_rows` flags at this robust z are left out of
            the criterion (squared-error regression metrics only; None or 0 keeps every row).

    Returns:
        The selection.

    Raises:
        ValueError: no members.
    """
    if not oofs:
        raise ValueError("greedy_selection needs at least one member")
    ids = list(oofs)
    keep = gross_error_rows(spec, y_true, oofs, gross_error_sd)
    if keep is not None:
        y_true = y_true[keep]
        oofs = {m: p[keep] for m, p in oofs.items()}
    geometric = blend == "geometric"
    if geometric:
        oofs = {m: _to_logits(spec, p) for m, p in oofs.items()}
    total = None
    chosen: list[int] = []
    best_prefix: tuple[float, list[int]] | None = None
    name, score, higher = selection_criterion(spec, y_true)
    since_best = 0
    for _ in range(max_steps):
        if since_best >= patience:
            break
        step_best = None
        for m in ids:
            cand = (oofs[m] if total is None else (total + oofs[m])) / (len(chosen) + 1)
            value = score(_from_logits(spec, cand) if geometric else cand)
            if step_best is None or (value > step_best[0] if higher else value < step_best[0]):
                step_best = (value, m)
        value, m = step_best
        chosen.append(m)
        total = oofs[m].copy() if total is None else total + oofs[m]
        if best_prefix is None or (value > best_prefix[0] if higher else value < best_prefix[0]):
            best_prefix = (value, list(chosen))
            since_best = 0
        else:
            since_best += 1
    weights: dict[int, int] = {}
    for m in best_prefix[1]:
        weights[m] = weights.get(m, 0) + 1
    excluded = 0 if keep is None else int((~keep).sum())
    return EnsembleSelection(weights=weights, criterion=name, criterion_value=float(best_prefix[0]), blend=blend, excluded_rows=excluded)


def _fit_temperature(spec: TaskSpec, y_true: np.ndarray, blended: np.ndarray) -> tuple[float, float]:
    """Temperature in [0.25, 4] minimising the selection criterion of the blend (Guo et al.
    2017, §4.2): ``(temperature, criterion value)``; bounded scalar search on log T."""
    from scipy.optimize import minimize_scalar

    z = _to_logits(spec, blended)
    _, score, higher = selection_criterion(spec, y_true)

    def loss(log_t: float) -> float:
        value = score(_from_logits(spec, z / np.exp(log_t)))
        return -value if higher else value

    res = minimize_scalar(loss, bounds=(np.log(0.25), np.log(4.0)), method="bounded", options={"xatol": 1e-3})
    t = round(float(np.exp(res.x)), 4)  # as written into the ensemble's program
    value = score(_from_logits(spec, z / t))
    return t, float(value)


# members tried alone with a fitted temperature besides the greedy blends (select_ensemble)
_CALIBRATED_SINGLES = 5
# criteria that depend only on the order of rows within each prediction column
_RANK_CRITERIA = frozenset({"roc_auc", "mean_column_roc_auc"})


def select_ensemble(
    spec: TaskSpec, y_true: np.ndarray, oofs: Mapping[int, np.ndarray], *, max_steps: int = 25, gross_error_sd: float | None = GROSS_ERROR_SD
) -> EnsembleSelection:
    """Greedy forward selection (Caruana et al. 2004) with the probability refinements of this
    module: for probability outputs, both the arithmetic and the geometric blend are selected
    and the better kept, then a temperature is fitted on the blend and kept if it helps by more
    than 1e-6 of the criterion; the five members best before calibration are also tried alone,
    each with its own fitted temperature, and one of them replaces the blend if it is better
    still. Regression tasks get the arithmetic blend only; binary and multilabel tasks scored
    by ROC AUC skip the temperature steps (a per-column sigmoid temperature keeps each column's
    order of rows, so it cannot change the criterion).

    Args and Raises: as :func:`greedy_selection`.

    Returns:
        The selection, with ``blend`` and ``temperature`` set.
    """
    best = greedy_selection(spec, y_true, oofs, max_steps=max_steps, gross_error_sd=gross_error_sd)
    if not _probabilistic(spec):
        return best
    higher = selection_criterion(spec, y_true)[2]

    def better(a: float, b: float) -> bool:
        return a > b + 1e-6 if higher else a < b - 1e-6

    geo = greedy_selection(spec, y_true, oofs, max_steps=max_steps, blend="geometric", gross_error_sd=gross_error_sd)
    if better(geo.criterion_value, best.criterion_value):
        best = geo
    if best.criterion in _RANK_CRITERIA and spec.task_kind in ("binary", "multilabel"):
        # one sigmoid per column: a temperature keeps every column's order of rows, so it cannot
        # change a ranking metric; and greedy selection's first step already is the best single
        return best
    ids = list(best.weights)
    blended = blend_predictions(spec, [oofs[i] for i in ids], [best.weights[i] for i in ids], best.blend)
    t, value = _fit_temperature(spec, y_true, blended)
    if better(value, best.criterion_value):
        best = dataclasses.replace(best, temperature=t, criterion_value=value)
    # Greedy steps compare members before calibration: an under-confident member (a regularised
    # linear model on many classes) loses every step, yet calibrated alone it can beat the
    # calibrated blend. The best few members are also tried alone with their own temperature.
    _, score, _ = selection_criterion(spec, y_true)
    raw = sorted(oofs, key=lambda m: score(oofs[m]), reverse=higher)
    for m in raw[:_CALIBRATED_SINGLES]:
        t, value = _fit_temperature(spec, y_true, oofs[m])
        if better(value, best.criterion_value):
            best = EnsembleSelection(weights={m: 1}, criterion=best.criterion, criterion_value=value, blend="mean", temperature=t)
    return best


def nested_ensemble_score(
    spec: TaskSpec,
    y_true: np.ndarray,
    oofs: Mapping[int, np.ndarray],
    folds: np.ndarray,
    *,
    max_steps: int = 25,
    gross_error_sd: float | None = GROSS_ERROR_SD,
) -> float:
    """The task metric of ensemble selection itself, cross-fitted over the folds: for each fold
    ``k``, :func:`select_ensemble` (members, blend, temperature) is fitted on the OOF rows of the
    other folds and applied to the rows of fold ``k``; the blended rows are scored together.

    Selecting weights, a blend and a temperature on the same OOF rows that then score the
    ensemble is optimistic (the selection overfits them, most with many members and few rows:
    Caruana et al. 2004, §5, hold out a "hillclimb set" for the same reason). This estimate has no
    such bias, so the final choice between the ensemble and the best single node compares like
    with like (the single node's OOF score involves no fitting on its own validation rows).

    Args:
        y_true: Labels of the validated rows, shape (n,) or (n, n_targets).
        oofs: Member id -> OOF predictions of those rows, each (n, n_cols).
        folds: Fold of each row, shape (n,).

    Returns:
        The task metric (its own direction) of the cross-fitted blend.
    """
    ids = list(oofs)
    nested = np.zeros_like(np.asarray(oofs[ids[0]], dtype=float))
    folds = second_level_folds(folds)
    for k in np.unique(folds):
        fit, held = folds != k, folds == k
        sel = select_ensemble(spec, y_true[fit], {i: oofs[i][fit] for i in ids}, max_steps=max_steps, gross_error_sd=gross_error_sd)
        chosen = list(sel.weights)
        nested[held] = blend_predictions(spec, [oofs[i][held] for i in chosen], [sel.weights[i] for i in chosen], sel.blend, sel.temperature)
    return score_predictions(spec, y_true, nested)


def second_level_folds(folds: np.ndarray, parts: int = 5) -> np.ndarray:
    """The folds a second level (ensemble selection's nested score, stacking, the fold standard
    error) uses on the validated rows: the task's own folds, or, under a holdout (one validated
    fold), ``parts`` interleaved parts of it (row ``i`` in part ``i % parts``).

    Args:
        folds: Fold of each validated row, shape (n,).

    Returns:
        Fold labels, shape (n,).
    """
    if len(np.unique(folds)) > 1:
        return folds
    return np.arange(len(folds)) % parts


def fold_standard_error(spec: TaskSpec, y_true: np.ndarray, pred: np.ndarray, folds: np.ndarray) -> float:
    """Standard error of the task metric across folds: ``std(fold scores, ddof=1) / sqrt(k)``.

    Args:
        y_true, pred: Labels and predictions of the validated rows.
        folds: Fold of each of those rows, shape (n,).
    """
    folds = second_level_folds(folds)
    scores = [score_predictions(spec, y_true[folds == k], pred[folds == k]) for k in np.unique(folds)]
    if len(scores) < 2:
        return 0.0
    return float(np.std(scores, ddof=1) / np.sqrt(len(scores)))


def honest_score(node) -> float:
    """An ensemble node's cross-fitted score (``config["nested_score"]``) when it has one, else
    its engine score: an ensemble's own OOF score is optimistic, its weights were fitted on those
    rows (:func:`nested_ensemble_score`)."""
    nested = node.config.get("nested_score")
    return float(nested) if nested is not None else float(node.score)


#: how the plan of the ensemble built in the budget's reserved slice at the end of a run starts
#: (for a reader; the engine knows that node by its role, :attr:`mcgs.node.NodeRole.FINAL_ENSEMBLE`)
FINAL_ENSEMBLE_TAG = "[final ensemble]"


def choose_final(best, ensembles: Sequence, higher_is_better: bool, standard_error: Callable[[], float]):
    """The node a run hands in: the best single node or one of its ensemble nodes.

    Once the run's final ensemble exists (role :attr:`~mcgs.node.NodeRole.FINAL_ENSEMBLE`), it is
    the only ensemble considered: its selection had every node and every earlier ensemble's
    members to choose from, and picking the best of a dozen in-search ensembles by a noisy
    estimate favours the luckiest one. Re-deciding the 17 stored runs of the six-competition
    campaign this way changed 9 submissions, 8 for the better on the private split
    (leaf-classification 0.048 to 0.014-0.038) and one worse by a passenger (spaceship-titanic);
    docs/search.md, Ensembles.

    An ensemble is eligible when its honest score (:func:`honest_score`) is at least as good as
    the best single node's score, or, if it was created after that node (``seq`` greater), when
    it is worse by at most one standard error of the best node's fold scores (the one-standard-
    error rule, module docstring). The eligible ensemble with the best honest score wins (the
    latest among equals); with none eligible, the best single node.

    Args:
        best: The best valid non-ensemble node (a :class:`~mcgs.node.FrozenNode`).
        ensembles: Valid ensemble nodes of the run, any order.
        higher_is_better: Metric direction.
        standard_error: Returns the standard error of ``best``'s fold scores (metric units); called
            at most once, and only when an ensemble's eligibility depends on it.

    Returns:
        ``best`` or one of ``ensembles``.
    """
    final = [e for e in ensembles if getattr(e, "role", None) is NodeRole.FINAL_ENSEMBLE]
    if final:
        ensembles = [max(final, key=lambda e: e.seq)]
    sign = 1.0 if higher_is_better else -1.0
    se: list[float] = []

    def eligible(e) -> bool:
        gap = sign * (best.score - honest_score(e))  # > 0: the ensemble is worse
        if gap <= 0:
            return True
        if e.seq < best.seq:
            return False
        if not se:
            se.append(standard_error())
        return gap <= se[0]

    chosen = [e for e in ensembles if eligible(e)]
    if not chosen:
        return best
    return max(chosen, key=lambda e: (sign * honest_score(e), e.seq))


def render_ensemble_program(members: Mapping[str, int], plan: str, blend: str = "mean", temperature: float = 1.0) -> str:
    """The ensemble node's program: blends members' prediction files with fixed weights.

    Args:
        members: member workspace (relative to the ensemble's workspace) -> weight.
        plan: Text placed in the docstring.
        blend, temperature: As :class:`EnsembleSelection`.
    """
    return _render("ensemble.py.j2", "mcgs ensemble node", repr(dict(members)), plan, blend=blend, temperature=temperature)


def render_forecast_ensemble_program(members: Mapping[str, int], plan: str) -> str:
    """A forecasting task's ensemble node's program: blends its members' validation forecasts
    with fixed weights (its test windows are the members' forecast-mode answers, blended by the
    engine: :func:`mcgs.forecast_mode.write_test_forecast`).

    Args:
        members: member workspace (relative to the ensemble's workspace) -> weight.
        plan: Text placed in the docstring.
    """
    return _render("forecast_ensemble.py.j2", "mcgs forecast ensemble node", repr(dict(members)), plan)


def _render(template: str, title: str, members: str, plan: str, **extra) -> str:
    from mcgs.contract import CONTRACT_VERSION
    from mcgs.knowledge_base import template_environment

    return template_environment().get_template(template).render(title=title, plan=plan, members=members, contract_version=CONTRACT_VERSION, **extra)


def render_stacking_program(members: list[str], plan: str) -> str:
    """The program of a stacking ensemble node (``ensemble_method="stacking"``): a
    second-level model on the members' OOF predictions, cross-validated on the task's folds.

    Args:
        members: member workspaces, relative to the ensemble's workspace.
        plan: Text placed in the docstring.
    """
    return _render("stacking.py.j2", "mcgs stacking node", repr(list(members)), plan)
