"""Metric registry: name -> scorer, direction and whether it needs probabilities.

The engine, never a candidate, scores predictions (DESIGN §2). A metric's direction is a
property of the registered metric and is fixed once per task when the :class:`~mcgs.task.TaskSpec`
is built; nothing a candidate prints can change it.

All scorers are thin wrappers over :mod:`sklearn.metrics`. MLE-bench grader names
(``auc-roc``, ``multi-class-log-loss``, ``root-mean-squared-error`` ...) are accepted as
aliases, so a competition's ``config.yaml`` can be read as it is.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

__all__ = ["Metric", "get_metric", "metric_names", "register_metric", "UnknownMetricError"]


class UnknownMetricError(ValueError):
    """Raised when a metric name is neither registered nor an alias."""


@dataclasses.dataclass(frozen=True)
class Metric:
    """One evaluation metric.

    Attributes:
        name: Canonical name (``accuracy``, ``roc_auc`` ...).
        higher_is_better: Direction, fixed for every task that uses this metric.
        needs_proba: True when the metric is computed on probabilities (``roc_auc``,
            ``log_loss``); False when it needs hard labels or values (labels are derived from
            probabilities by argmax, or a 0.5 threshold for binary tasks).
        kind: ``"classification"`` or ``"regression"``.
        fn: ``fn(y_true, y_pred) -> float``; for classification metrics that need
            probabilities ``y_pred`` is an array of shape (n,) for binary tasks (probability of
            the positive class) or (n, k) for multi-class, with ``labels`` passed as keyword.
        target_above: Regression targets must be greater than this (``rmsle``: -1, since it
            takes ``log(1 + y)``); None for no bound. Checked when a task is loaded.
    """

    name: str
    higher_is_better: bool
    needs_proba: bool
    kind: str
    fn: Callable[..., float] = dataclasses.field(repr=False, compare=False)
    target_above: float | None = None

    def score(self, y_true, y_pred, **kwargs) -> float:
        """Return the metric value as a Python float.

        Raises:
            ValueError: when scikit-learn rejects the inputs (wrong shapes, NaN...).
        """
        return float(self.fn(np.asarray(y_true), np.asarray(y_pred), **kwargs))

    def is_better(self, a: float, b: float) -> bool:
        """True when score ``a`` is strictly better than ``b`` in this metric's direction."""
        from mcgs.direction import better

        return better(a, b, self.higher_is_better)

    def worst(self) -> float:
        """The worst possible value in this direction (``-inf`` or ``+inf``)."""
        return -np.inf if self.higher_is_better else np.inf


def _accuracy(y_true, y_pred, **_):
    from sklearn.metrics import accuracy_score

    return accuracy_score(y_true, y_pred)


def _roc_auc(y_true, y_pred, labels=None, **_):
    from sklearn.metrics import roc_auc_score

    if y_pred.ndim == 2 and y_pred.shape[1] > 1:
        return roc_auc_score(y_true, y_pred, multi_class="ovr", labels=labels)
    return roc_auc_score(y_true, y_pred)


def _log_loss(y_true, y_pred, labels=None, **_):
    from sklearn.metrics import log_loss

    return log_loss(y_true, y_pred, labels=labels)


def _rmse(y_true, y_pred, **_):
    from sklearn.metrics import root_mean_squared_error

    return root_mean_squared_error(y_true, y_pred)


def _rmsle(y_true, y_pred, **_):
    from sklearn.metrics import root_mean_squared_log_error

    return root_mean_squared_log_error(y_true, np.clip(y_pred, 0, None))


def _mse(y_true, y_pred, **_):
    return float(np.mean((np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)) ** 2))


def _mae(y_true, y_pred, **_):
    from sklearn.metrics import mean_absolute_error

    return mean_absolute_error(y_true, y_pred)


def _f1(y_true, y_pred, labels=None, pos_label=1, **_):
    from sklearn.metrics import f1_score

    if labels is not None and len(labels) > 2:
        return f1_score(y_true, y_pred, average="macro", labels=labels)
    return f1_score(y_true, y_pred, pos_label=pos_label)


def _f1_average(average: str):
    def fn(y_true, y_pred, labels=None, **_):
        from sklearn.metrics import f1_score

        return f1_score(y_true, y_pred, average=average, labels=labels)

    return fn


def _columns(y) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    return y.reshape(-1, 1) if y.ndim == 1 else y


def _mean_column_rmsle(y_true, y_pred, **_):
    t, p = _columns(y_true), _columns(y_pred)
    return float(np.mean([_rmsle(t[:, j], p[:, j]) for j in range(t.shape[1])]))


def _mean_column_roc_auc(y_true, y_pred, **_):
    t, p = _columns(y_true), _columns(y_pred)
    return float(np.mean([_roc_auc(t[:, j], p[:, j]) for j in range(t.shape[1])]))


_REGISTRY: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("accuracy", True, False, "classification", _accuracy),
        Metric("roc_auc", True, True, "classification", _roc_auc),
        Metric("log_loss", False, True, "classification", _log_loss),
        Metric("f1", True, False, "classification", _f1),
        Metric("f1_micro", True, False, "classification", _f1_average("micro")),
        Metric("f1_macro", True, False, "classification", _f1_average("macro")),
        Metric("mean_column_roc_auc", True, True, "classification", _mean_column_roc_auc),
        Metric("mean_column_rmsle", False, False, "regression", _mean_column_rmsle, target_above=-1.0),
        Metric("rmse", False, False, "regression", _rmse),
        Metric("rmsle", False, False, "regression", _rmsle, target_above=-1.0),
        Metric("mae", False, False, "regression", _mae),
        Metric("mse", False, False, "regression", _mse),
    )
}

_BUILTIN = frozenset(_REGISTRY)

# Aliases: common spellings and MLE-bench grader names (mlebench/grade_helpers + each
# competition's config.yaml `grader.name`).
_ALIASES: dict[str, str] = {
    "acc": "accuracy",
    "classification-accuracy": "accuracy",
    "auc": "roc_auc",
    "auc-roc": "roc_auc",
    "roc-auc": "roc_auc",
    "rocauc": "roc_auc",
    "logloss": "log_loss",
    "log-loss": "log_loss",
    "multi-class-log-loss": "log_loss",
    "multiclass-log-loss": "log_loss",
    "binary-log-loss": "log_loss",
    "root-mean-squared-error": "rmse",
    "root_mean_squared_error": "rmse",
    "root-mean-squared-log-error": "rmsle",
    "root_mean_squared_log_error": "rmsle",
    "mean-absolute-error": "mae",
    "mean-squared-error": "mse",
    "mean_squared_error": "mse",
    "mean_absolute_error": "mae",
    "f1-score": "f1",
    "f1_score": "f1",
    "micro-f1": "f1_micro",
    "f1-micro": "f1_micro",
    "macro-f1": "f1_macro",
    "f1-macro": "f1_macro",
    "mean-column-wise-roc-auc": "mean_column_roc_auc",
    "column-wise-roc-auc": "mean_column_roc_auc",
    "mean-column-wise-rmsle": "mean_column_rmsle",
    "column-wise-rmsle": "mean_column_rmsle",
}


def register_metric(
    name: str,
    fn: Callable[..., float],
    *,
    higher_is_better: bool,
    needs_proba: bool = False,
    kind: str = "classification",
    replace: bool = False,
) -> Metric:
    """Add a user-defined metric, usable as ``metric:`` in task.yaml or ``TaskSpec.metric``.

    The engine scores with it like with a built-in metric: ``fn(y_true, y_pred, **kw)`` on the
    OOF rows, in the given direction, fixed once per task. Register it in every process that
    opens the run (the run stores only the name), before creating or loading the search.

    Args:
        name: Canonical name (lower case; must not clash with a built-in name or alias).
        fn: ``fn(y_true, y_pred, **kwargs) -> float``. ``y_true``: 0/1 for binary tasks (1 is
            the positive class), class labels as strings for multi-class, floats for
            regression. ``y_pred`` as described in :class:`Metric` (probabilities when
            ``needs_proba``, else labels or values). Extra keywords such as ``labels`` may be
            passed: accept ``**kwargs``.
        higher_is_better: The metric's direction.
        needs_proba: True when ``fn`` takes probabilities.
        kind: ``classification`` or ``regression``.
        replace: Allow redefining a metric registered earlier by a user.

    Returns:
        The registered :class:`Metric`.

    Raises:
        ValueError: a bad name or kind, ``fn`` not callable, a clash with a built-in, or a
            second registration without ``replace``.
    """
    if not callable(fn):
        raise ValueError(f"metric {name!r}: fn must be a function fn(y_true, y_pred, **kwargs) -> float, got {type(fn).__name__}")
    key = name.strip().lower()
    if not key or key != name or not key.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"metric name {name!r}: use lower-case letters, digits, '_' or '-'")
    if kind not in ("classification", "regression"):
        raise ValueError(f"metric {name!r}: kind must be 'classification' or 'regression', got {kind!r}")
    if key in _BUILTIN or key in _ALIASES:
        raise ValueError(f"metric {name!r} is built in; choose another name")
    if key in _REGISTRY and not replace:
        raise ValueError(f"metric {name!r} is already registered; pass replace=True to redefine it")
    metric = Metric(key, bool(higher_is_better), bool(needs_proba), kind, fn)
    _REGISTRY[key] = metric
    return metric


def metric_names() -> list[str]:
    """Canonical names of all registered metrics, sorted."""
    return sorted(_REGISTRY)


def get_metric(name: str) -> Metric:
    """Look a metric up by canonical name or alias (case-insensitive).

    Returns:
        The :class:`Metric` (built in, or registered in this process by :func:`register_metric`).

    Raises:
        UnknownMetricError: naming the unknown metric and listing the known ones.
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        import difflib

        close = difflib.get_close_matches(key, [*metric_names(), *_ALIASES], n=1, cutoff=0.75)
        hint = f"did you mean {_ALIASES.get(close[0], close[0])!r}? " if close else ""
        raise UnknownMetricError(
            f"unknown metric {name!r}; {hint}known metrics: {', '.join(metric_names())} "
            f"(aliases: {', '.join(sorted(_ALIASES))})"
        )
    return _REGISTRY[key]
