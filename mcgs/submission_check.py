"""The one submission validator: what is wrong with a submission, every problem at once.

The engine checks each candidate's ``submission.csv`` against the task's sample submission
(:func:`mcgs.evaluation.validate_submission`) and ``mcgs mlebench grade`` checks a submission
against a competition's answers (:mod:`mcgs.mlebench.grade`); both call
:func:`submission_problems` so that a submission the engine accepts is one the grader
accepts, and both name the same problems in the same words.

The checks follow MLE-bench's ``mlebench/competitions/utils.py`` (``prepare_for_accuracy_metric``,
``prepare_for_auroc_metric``: required columns, same length, same ids once sorted, numeric
probabilities in [0, 1]) and are stricter in three ways: an unexpected column is rejected,
a missing prediction is named with its id rather than failing inside scikit-learn, and
duplicate ids are named.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Literal, Sequence

import numpy as np
import pandas as pd

__all__ = ["SubmissionRules", "submission_problems", "preview"]

_PREVIEW = 5  # values quoted in a message before "(+N more)"

#: Cell texts that mean "no value" when a submission is read as text (pandas' NA strings
#: that a candidate is likely to write).
NA_TEXTS = ("", "nan", "NaN", "None", "NA", "null")


def preview(values: Sequence[Any]) -> str:
    """``['a', 'b', 'c'] (+7 more)``: at most five values quoted, for error messages."""
    values = list(values)
    head = ", ".join(repr(v) for v in values[:_PREVIEW])
    more = f" (+{len(values) - _PREVIEW} more)" if len(values) > _PREVIEW else ""
    return f"[{head}]{more}"


@dataclasses.dataclass(frozen=True)
class SubmissionRules:
    """What a valid submission looks like.

    Attributes:
        key: Column matching submission rows to expected rows; ``None`` matches by row order
            (then only the row count is checked).
        predictions: Prediction column(s) the submission must hold.
        optional: Further column(s) it may hold (ignored when scoring), such as columns a
            task echoes from its test table.
        ordered_columns: Require exactly ``key``/``predictions``/``optional`` in the
            reference's column order (the engine's rule: a submission looks like the sample).
        repeated_keys: The expected keys may repeat (MLE-bench detecting-insults keys rows by
            comment text); keys are then compared as multisets and duplicates are allowed as
            far as the reference has them.
        values: What the prediction cells must hold: ``"any"`` (checked by the caller),
            ``"label"`` (one of ``class_labels``, compared as text), ``"number"`` (finite
            numbers) or ``"probability"`` (finite numbers in [0, 1]).
        class_labels: The allowed labels when ``values == "label"``.
        reference: How messages name the expected rows, e.g. ``"sample_submission.csv"``.
    """

    key: str | None
    predictions: tuple[str, ...]
    optional: tuple[str, ...] = ()
    ordered_columns: bool = False
    repeated_keys: bool = False
    values: Literal["any", "label", "number", "probability"] = "any"
    class_labels: frozenset[str] = frozenset()
    reference: str = "the answers"

    @property
    def required(self) -> list[str]:
        """The key (if any) and the prediction columns."""
        return ([self.key] if self.key else []) + list(self.predictions)


def submission_problems(submission: pd.DataFrame, expected: pd.DataFrame, rules: SubmissionRules) -> list[str]:
    """Every problem of ``submission`` against the ``expected`` rows, in a stable order.

    Args:
        submission: The submission as read from CSV (as text or with pandas' default types;
            ``expected`` must be read the same way so that keys compare equal).
        expected: The rows the submission must cover: the answers, or the sample
            submission. Only its key column and column order are used.
        rules: What a valid submission looks like.

    Returns:
        One message per problem, none holding ``"; "`` (callers join them with it) (empty when the submission is valid), naming the columns,
        the keys (or row numbers) and, for bad cells, the values. An empty submission or one
        without a required column yields just that problem: nothing else can be checked.
    """
    if submission.empty and not len(submission.columns):
        return [f"submission is empty (expected {len(expected)} rows with columns {rules.required})"]
    missing_cols = [c for c in rules.required if c not in submission.columns]
    if missing_cols:
        return [f"submission is missing column(s) {preview(missing_cols)} (expected {rules.required}, "
                f"got {preview(submission.columns)})"]
    problems = _column_problems(submission, expected, rules)
    if len(submission) != len(expected):
        problems.append(f"submission has {len(submission)} rows, expected {len(expected)} (as in {rules.reference})")
    if rules.key:
        problems += _key_problems(submission[rules.key], expected[rules.key], rules)
    problems += _value_problems(submission, rules)
    return problems


def _column_problems(submission: pd.DataFrame, expected: pd.DataFrame, rules: SubmissionRules) -> list[str]:
    allowed = set(rules.required) | set(rules.optional)
    extra = [c for c in submission.columns if c not in allowed]
    if extra:
        also = f", optionally also {list(rules.optional)}" if rules.optional else ""
        return [f"unexpected column(s) {preview(extra)} (expected exactly {rules.required}{also})"]
    if rules.ordered_columns:
        want = [c for c in expected.columns if c in allowed]
        absent = [c for c in want if c not in submission.columns]
        if absent:
            return [f"submission is missing column(s) {preview(absent)} (expected {want} as in {rules.reference})"]
        if list(submission.columns) != want:
            return [f"columns in order {list(submission.columns)}, expected {want} (as in {rules.reference})"]
    return []


def _key_problems(keys: pd.Series, expected: pd.Series, rules: SubmissionRules) -> list[str]:
    name = rules.key
    problems = []
    empty = _missing_mask(keys)
    if empty.any():
        problems.append(f"{int(empty.sum())} row(s) have an empty {name}")
    keys = keys[~empty]
    if rules.repeated_keys:
        got, want = Counter(keys.tolist()), Counter(expected.tolist())
        missing, unknown = list((want - got).elements()), list((got - want).elements())
    else:
        dup = keys[keys.duplicated(keep=False)].unique().tolist()
        if dup:
            problems.append(f"duplicate {name}(s) {preview(dup)}")
        missing = expected[~expected.isin(keys)].tolist()
        unknown = keys[~keys.isin(expected)].unique().tolist()
    if missing:
        problems.append(f"missing {len(missing)} {name}(s) {preview(missing)}")
    if unknown:
        problems.append(f"{len(unknown)} {name}(s) not in the test set {preview(unknown)}")
    return problems


def _value_problems(submission: pd.DataFrame, rules: SubmissionRules) -> list[str]:
    problems = []
    for col in rules.predictions:
        cells = submission[col]
        empty = _missing_mask(cells)
        if empty.any():
            problems.append(f"missing prediction (NaN) in {col!r} for {_rows(submission, empty, rules)}")
        cells = cells[~empty]
        if rules.values == "label":
            bad = sorted(set(cells.astype(str)) - rules.class_labels)
            if bad:
                problems.append(f"{col!r} holds value(s) {preview(bad)} that are not class labels "
                                f"{sorted(rules.class_labels)}")
        elif rules.values in ("number", "probability"):
            problems += _number_problems(submission, cells, col, rules)
    return problems


def _number_problems(submission: pd.DataFrame, cells: pd.Series, col: str, rules: SubmissionRules) -> list[str]:
    num = pd.to_numeric(cells, errors="coerce")
    text = num.isna()
    if text.any():
        return [f"non-numeric value(s) {preview(cells[text].unique().tolist())} in {col!r} for "
                f"{_rows(submission, text.reindex(submission.index, fill_value=False), rules)}"]
    if not np.isfinite(num.to_numpy(float)).all():
        return [f"{col!r} has infinite values"]
    if rules.values == "probability":
        outside = ((num < 0) | (num > 1)).reindex(submission.index, fill_value=False)
        if outside.any():
            return [f"{col!r} has {int(outside.sum())} probabilities outside [0, 1] for "
                    f"{_rows(submission, outside, rules)}"]
    return []


def _missing_mask(cells: pd.Series) -> pd.Series:
    """True where a cell holds no value: NaN, or one of :data:`NA_TEXTS` when read as text."""
    mask = cells.isna()
    if cells.dtype == object or pd.api.types.is_string_dtype(cells):
        mask |= cells.astype(str).str.strip().isin(NA_TEXTS) & cells.notna()
    return mask


def _rows(submission: pd.DataFrame, mask: pd.Series, rules: SubmissionRules) -> str:
    """``'3 pid(s) ['a', 'b', 'c']'``, or row numbers when rows are matched by order."""
    if rules.key:
        return f"{int(mask.sum())} {rules.key}(s) {preview(submission.loc[mask, rules.key].tolist())}"
    return f"{int(mask.sum())} row(s) {preview(np.flatnonzero(mask.to_numpy()).tolist())}"
