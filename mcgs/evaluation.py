"""Engine-side evaluation: validate a candidate's outputs and score its OOF predictions.

The candidate never computes its own score (DESIGN §2): the engine reads ``working/oof.csv``,
aligns it with the labels it holds, and applies the task metric in the task's direction.
Every failure is an :class:`OutputError` whose message names the file and the offending rows,
ids or columns; the engine turns it into an ``INVALID_OUTPUT`` outcome. The files are read
through :mod:`mcgs.candidate_files`: never through a link, only regular files inside the
workspace, each with a size cap.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pandas as pd

from mcgs.candidate_files import DEFAULT_MAX_OUTPUT_MB, CandidateFileError, read_candidate_file
from mcgs.contract import OOF_PATH, SUBMISSION_PATH, TEST_PRED_PATH
from mcgs.forecast import VAL_FORECAST_PATH, ForecastLabels
from mcgs.metrics import get_metric
from mcgs.submission_check import SubmissionRules, submission_problems
from mcgs.task import TaskSpec, read_table

__all__ = [
    "OutputError",
    "Evaluation",
    "TaskLabels",
    "validate_submission",
    "read_predictions",
    "score_predictions",
    "positive_labels",
    "normalised_probabilities",
    "evaluate_workspace",
    "evaluate_forecast",
    "read_forecast",
]

_MAX_LISTED = 5


class OutputError(ValueError):
    """A candidate's output file is missing, unsafe to read (a link, not a regular file, over
    the size cap: :mod:`mcgs.candidate_files`) or does not follow the contract."""


_DEFAULT_CAP = DEFAULT_MAX_OUTPUT_MB * 2**20


def _read_output(workspace: Path, rel: str, max_bytes: int) -> io.BytesIO:
    """The bytes of a candidate's output file, read safely (OutputError otherwise)."""
    try:
        return io.BytesIO(read_candidate_file(workspace, rel, max_bytes=max_bytes))
    except CandidateFileError as exc:
        raise OutputError(str(exc)) from None


def _few(items) -> str:
    items = list(items)
    shown = ", ".join(repr(i) for i in items[:_MAX_LISTED])
    return shown + (f" ... ({len(items)} in all)" if len(items) > _MAX_LISTED else "")


@dataclasses.dataclass(frozen=True)
class TaskLabels:
    """What the engine holds to score a task: labels and folds, read once per run.

    Attributes:
        spec: The task.
        y: Training labels, shape (n_train,) or (n_train, n_targets) for multi-target.
        folds: Fold of each training row, shape (n_train,); -1 = never validated.
        sample: The sample submission table.
    """

    spec: TaskSpec
    y: np.ndarray
    folds: np.ndarray
    sample: pd.DataFrame

    @classmethod
    def load(cls, spec: TaskSpec, folds_csv: Path) -> "TaskLabels":
        train = read_table(spec.train_path)
        y = train[spec.target_columns].to_numpy() if len(spec.target_columns) > 1 else train[spec.target_columns[0]].to_numpy()
        folds = pd.read_csv(folds_csv)["fold"].to_numpy()
        sample = pd.read_csv(spec.sample_submission_path, dtype=str, keep_default_na=False)
        return cls(spec=spec, y=y, folds=folds, sample=sample)

    @property
    def validated_rows(self) -> np.ndarray:
        return np.flatnonzero(self.folds >= 0)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Result of evaluating one workspace.

    Attributes:
        score: Metric value on the OOF rows (engine-computed).
        oof: OOF predictions aligned to ``TaskLabels.validated_rows``, shape (n_valid, n_cols).
        test_pred: Test predictions, shape (n_test, n_cols).
    """

    score: float
    oof: np.ndarray
    test_pred: np.ndarray


def _label_strings(values) -> set[str]:
    return {str(v) for v in values}


def validate_submission(spec: TaskSpec, sample: pd.DataFrame, workspace: Path, rel: str = SUBMISSION_PATH, *,
                        max_bytes: int = _DEFAULT_CAP) -> None:
    """Check a submission against ``sample_submission.csv`` the way MLE-bench does.

    Ids are matched by id (order does not matter) when the task has an id column, else by
    row order. Checks: file exists and parses, same columns, same row count, same id set,
    no duplicate ids, no missing values, labels among the class labels, probabilities in
    [0, 1], values numeric for regression.

    Args:
        workspace: The candidate's workspace; the submission is ``workspace/rel``.
        max_bytes: Size cap of the file (setting ``max_output_mb``).

    Raises:
        OutputError: naming the offending ids or columns, or why the file cannot be read.
    """
    data = _read_output(Path(workspace), rel, max_bytes)
    try:
        sub = pd.read_csv(data, dtype=str, keep_default_na=False)
    except Exception as exc:
        raise OutputError(f"{rel} is not a readable CSV: {exc}") from exc
    problems = submission_problems(sub, sample, submission_rules(spec, sample))
    if problems:
        raise OutputError(f"{rel}: " + "; ".join(problems))


def submission_rules(spec: TaskSpec, sample: pd.DataFrame) -> SubmissionRules:
    """The task's submission rules: the sample's columns in its order, ids matched by id
    (by row order without an id column), and cells as the task's submission format needs."""
    echo = tuple(c for c in sample.columns if c in spec.echo_columns)
    values = {"label": "label", "probability": "probability"}.get(spec.submission_format, "number")
    return SubmissionRules(
        key=spec.id_column,
        predictions=tuple(c for c in sample.columns if c != spec.id_column and c not in echo),
        optional=echo,
        ordered_columns=True,
        values=values,
        class_labels=frozenset(_label_strings(spec.class_labels or [])),
        reference="sample_submission.csv",
    )


def read_predictions(spec: TaskSpec, workspace: Path, rel: str, expected_rows: np.ndarray, *,
                     max_bytes: int = _DEFAULT_CAP) -> np.ndarray:
    """Read ``oof.csv`` or ``test_pred.csv`` and align it to ``expected_rows``.

    Args:
        spec: The task.
        workspace: The candidate's workspace.
        rel: The file's contract path in it (``working/oof.csv``), also used in messages.
        expected_rows: Row positions that must appear exactly once, shape (n,).
        max_bytes: Size cap of the file (setting ``max_output_mb``).

    Returns:
        Predictions, shape (n, len(spec.prediction_columns)), ordered as ``expected_rows``.

    Raises:
        OutputError: missing file or columns, missing/duplicate/unexpected rows, NaN,
            probabilities outside [0, 1]; a file that is not safe to read.
    """
    data = _read_output(Path(workspace), rel, max_bytes)
    try:
        df = pd.read_csv(data)
    except Exception as exc:
        raise OutputError(f"{rel} is not a readable CSV: {exc}") from exc
    df.columns = [str(c) for c in df.columns]
    cols = spec.prediction_columns
    need = ["row", *cols]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise OutputError(f"{rel}: missing columns {missing} (has {list(df.columns)}); expected {need}")
    rows = pd.to_numeric(df["row"], errors="coerce")
    if rows.isna().any():
        raise OutputError(f"{rel}: column 'row' must hold integer row positions")
    rows = rows.astype(int)
    dup = rows[rows.duplicated()].unique().tolist()
    if dup:
        raise OutputError(f"{rel}: duplicate rows {_few(dup)}")
    exp = set(expected_rows.tolist())
    got = set(rows.tolist())
    if got != exp:
        parts = []
        if exp - got:
            parts.append(f"missing rows {_few(sorted(exp - got))}")
        if got - exp:
            parts.append(f"unexpected rows {_few(sorted(got - exp))}")
        raise OutputError(f"{rel}: " + "; ".join(parts))
    vals = df.set_index(rows)[cols].apply(pd.to_numeric, errors="coerce").loc[expected_rows].to_numpy(dtype=float)
    if not np.isfinite(vals).all():
        bad_cols = [c for c, ok in zip(cols, np.isfinite(vals).all(axis=0)) if not ok]
        raise OutputError(f"{rel}: missing, non-numeric or infinite values in columns {bad_cols}")
    if spec.task_kind in ("binary", "multiclass", "multilabel") and ((vals < 0) | (vals > 1)).any():
        raise OutputError(f"{rel}: probabilities outside [0, 1]")
    return vals


def positive_labels(spec: TaskSpec, y_true: np.ndarray) -> np.ndarray:
    """Binary labels as 0/1, shape (n,): 1 where the label is the task's positive class (compared
    as read and as text, so ``True``, ``"True"`` and ``1`` / ``"1"`` match)."""
    pos = spec.positive_class
    return np.fromiter((v == pos or str(v) == str(pos) for v in y_true), dtype=int, count=len(y_true))


def normalised_probabilities(pred: np.ndarray) -> np.ndarray:
    """Class probabilities clipped to [1e-15, 1] and renormalised to sum to 1 per row, shape (n, k)."""
    p = np.clip(pred, 1e-15, 1)
    return p / p.sum(axis=1, keepdims=True)


def score_predictions(spec: TaskSpec, y_true: np.ndarray, pred: np.ndarray) -> float:
    """Score predictions with the task metric.

    Args:
        spec: The task (metric and kind).
        y_true: Labels as in the training table, shape (n,) or (n, n_targets).
        pred: Predictions in contract layout, shape (n, n_cols).

    Returns:
        The metric value (direction is ``spec.higher_is_better``).
    """
    metric = get_metric(spec.metric)
    if spec.task_kind == "binary":
        y = positive_labels(spec, y_true)
        p = pred[:, 0]
        if metric.needs_proba:
            return metric.score(y, p)
        return metric.score(y, (p >= 0.5).astype(int))
    if spec.task_kind == "multiclass":
        labels = [str(c) for c in spec.class_labels or []]
        y = np.array([str(v) for v in y_true])
        if metric.needs_proba:
            return metric.score(y, normalised_probabilities(pred), labels=labels)
        return metric.score(y, np.asarray(labels)[pred.argmax(axis=1)], labels=labels)
    if spec.task_kind == "regression":
        return metric.score(y_true.astype(float), pred[:, 0])
    if spec.task_kind == "multilabel":
        y = np.vectorize(lambda v: str(v).lower() in ("1", "true", "1.0"))(y_true).astype(int)
        return metric.score(y, pred)
    # multi-target regression: mean column-wise score
    return float(np.mean([metric.score(y_true[:, j].astype(float), pred[:, j]) for j in range(pred.shape[1])]))


def evaluate_workspace(labels: TaskLabels, workspace: Path, *, max_bytes: int = _DEFAULT_CAP) -> Evaluation:
    """Validate a finished candidate's outputs and compute its engine score.

    Args:
        max_bytes: Size cap of each output file (setting ``max_output_mb``).

    Raises:
        OutputError: any contract violation, with the file and offenders named.
    """
    if isinstance(labels, ForecastLabels):
        return evaluate_forecast(labels, workspace, max_bytes=max_bytes)
    spec = labels.spec
    rows = labels.validated_rows
    oof = read_predictions(spec, workspace, OOF_PATH, rows, max_bytes=max_bytes)
    test_pred = read_predictions(spec, workspace, TEST_PRED_PATH, np.arange(spec.n_test), max_bytes=max_bytes)
    validate_submission(spec, labels.sample, workspace, max_bytes=max_bytes)
    score = score_predictions(spec, labels.y[rows], oof)
    if not np.isfinite(score):
        raise OutputError(f"the metric {spec.metric} of {OOF_PATH} is not finite ({score})")
    return Evaluation(score=score, oof=oof, test_pred=test_pred)



def read_forecast(workspace: Path, rel: str, shape: tuple[int, ...], max_bytes: int = _DEFAULT_CAP) -> np.ndarray:
    """A forecast file of a workspace (``.npy``, no pickles), checked: float32 of ``shape``,
    finite.

    Raises:
        OutputError: missing, unsafe, not an array file, or of another shape, type or with
            values that are not finite; the message names the file and what is wrong.
    """
    raw = _read_output(workspace, rel, max_bytes)
    try:
        pred = np.load(raw, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise OutputError(f"{rel} is not a NumPy array file (np.save of a float32 array): {exc}") from None
    if not isinstance(pred, np.ndarray) or pred.dtype.kind not in "fi":
        raise OutputError(f"{rel} must hold numbers (float32), not {getattr(pred, 'dtype', type(pred).__name__)}")
    if pred.shape != tuple(shape):
        raise OutputError(f"{rel} has shape {pred.shape}; the contract asks for (windows, horizon, targets) = {tuple(shape)}")
    bad = ~np.isfinite(pred)
    if bad.any():
        raise OutputError(f"{rel} has {int(bad.sum())} values that are not finite (first in window {int(np.argwhere(bad)[0][0])})")
    return pred.astype(np.float32, copy=False)


def evaluate_forecast(labels: ForecastLabels, workspace: Path, *, max_bytes: int = _DEFAULT_CAP) -> Evaluation:
    """Score a forecasting candidate's validation forecasts (``working/val_forecast.npy``) with
    the task's metric over every window, step and target (scaled values, the protocol's).

    Returns:
        The :class:`Evaluation`; ``oof`` is the forecasts flattened per window, shape
        ``(windows, horizon * targets)``; ``test_pred`` is empty (test forecasts come only
        from forecast mode: :mod:`mcgs.forecast`).

    Raises:
        OutputError: the file breaks the contract (:func:`read_forecast`).
    """
    pred = read_forecast(workspace, VAL_FORECAST_PATH, labels.y.shape, max_bytes)
    score = get_metric(labels.spec.metric).score(labels.y.ravel(), pred.ravel().astype(np.float64))
    if not np.isfinite(score):
        raise OutputError(f"the metric {labels.spec.metric} of {VAL_FORECAST_PATH} is not finite ({score})")
    return Evaluation(score=score, oof=pred.reshape(len(pred), -1), test_pred=np.empty((0, pred[0].size), dtype=np.float32))
