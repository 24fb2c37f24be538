"""Metric registry: directions, probability needs, aliases and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mcgs.metrics import UnknownMetricError, get_metric, metric_names

# name, higher_is_better, needs_proba, y_true, y_pred, hand-computed value
TABLE = [
    ("accuracy", True, False, [1, 0, 1, 1], [1, 1, 1, 0], 0.5),
    ("roc_auc", True, True, [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], 0.75),
    ("log_loss", False, True, [1, 0], [0.8, 0.4], -(math.log(0.8) + math.log(0.6)) / 2),
    ("f1", True, False, [1, 0, 1, 1], [1, 1, 1, 0], 2 * (2 / 3) * (2 / 3) / (4 / 3)),
    ("rmse", False, False, [1.0, 2.0, 3.0], [1.0, 2.0, 5.0], math.sqrt(4 / 3)),
    ("rmsle", False, False, [0.0, 1.0], [1.0, 1.0], math.sqrt(math.log(2) ** 2 / 2)),
    ("mae", False, False, [1.0, 2.0, 3.0], [2.0, 2.0, 5.0], 1.0),
    ("mse", False, False, [1.0, 2.0, 3.0], [2.0, 2.0, 5.0], 5.0 / 3),
    # micro F1 = accuracy for single-label data; macro F1 = mean of per-class F1 (2/3 and 0)
    ("f1_micro", True, False, [0, 1, 2, 2], [0, 2, 2, 1], 0.5),
    ("f1_macro", True, False, [0, 1, 1, 1], [0, 0, 1, 1], (2 / 3 + 0.8) / 2),
    # column 1: AUC 1.0; column 2: AUC 0.5 (two of four positive-negative pairs ordered)
    ("mean_column_roc_auc", True, True, [[1, 0], [0, 1], [1, 1], [0, 0]], [[0.9, 0.2], [0.1, 0.8], [0.8, 0.1], [0.2, 0.3]], 0.75),
    # column 1 exact; column 2: log(1+3) vs log(1+1) on one of two rows
    ("mean_column_rmsle", False, False, [[1.0, 1.0], [2.0, 3.0]], [[1.0, 1.0], [2.0, 1.0]], (0 + math.sqrt(math.log(2) ** 2 / 2)) / 2),
]


@pytest.mark.parametrize("name, higher, proba, y, p, expected", TABLE)
def test_direction_and_value(name, higher, proba, y, p, expected):
    m = get_metric(name)
    assert m.higher_is_better is higher
    assert m.needs_proba is proba
    assert m.score(y, p) == pytest.approx(expected)


def test_every_metric_is_in_the_table():
    assert sorted(row[0] for row in TABLE) == metric_names()


@pytest.mark.parametrize("alias, name", [("auc-roc", "roc_auc"), ("multi-class-log-loss", "log_loss"), ("root-mean-squared-error", "rmse"), ("ACCURACY", "accuracy")])
def test_aliases(alias, name):
    assert get_metric(alias).name == name


def test_is_better_follows_direction():
    assert get_metric("accuracy").is_better(0.9, 0.8)
    assert get_metric("rmse").is_better(0.8, 0.9)
    assert not get_metric("log_loss").is_better(0.9, 0.8)


def test_multiclass_log_loss_by_hand():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    expected = -(math.log(0.7) + math.log(0.8)) / 2
    assert get_metric("log_loss").score(["a", "c"], p, labels=["a", "b", "c"]) == pytest.approx(expected)


def test_unknown_metric_lists_known_ones():
    with pytest.raises(UnknownMetricError, match="known metrics: accuracy"):
        get_metric("kappa2")
