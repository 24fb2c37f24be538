"""Grade a submission CSV the way MLE-bench does.

Sources (openai/mle-bench):

* ``mlebench/grade.py`` ``grade_csv``: a submission exists when it is a ``.csv`` file; it is
  valid when the grader returns a score; the report's fields are those of
  ``mlebench/grade_helpers.py`` ``CompetitionReport``.
* ``mlebench/grade_helpers.py`` ``Grader.__call__``: a score is rounded to 5 decimals; an
  :class:`InvalidSubmissionError` (or any grader failure) makes the submission invalid.
* ``mlebench/grade_helpers.py`` ``Grader.rank_score``: medal thresholds by Kaggle's
  progression rule (kaggle.com/progression) applied to the competition's ``leaderboard.csv``;
  medals are exclusive (gold, else silver, else bronze); a threshold is reached inclusively;
  ``above_median`` is strict.
* ``mlebench/competitions/utils.py`` ``prepare_for_accuracy_metric``: the accuracy grader's
  checks (same length, required columns, same ids after sorting by id).

Where mcgs is stricter than MLE-bench it says so in the function's docstring.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict

from ..metrics import UnknownMetricError, get_metric
from ..submission_check import SubmissionRules, preview, submission_problems
from .prepare import CONFIG_FILE, LEADERBOARD_FILE, read_csv
from .registry import CompetitionSpec, MLEBenchError, get_competition

__all__ = [
    "InvalidSubmissionError",
    "GradingReport",
    "MLEBENCH_REPORT_FIELDS",
    "medal_ranks",
    "medal_thresholds",
    "medals_for_score",
    "align_submission",
    "grade_accuracy",
    "grade_auc_roc",
    "grade_mean_column_rmsle",
    "grade_one_hot_log_loss",
    "grade_submission",
    "load_competition_config",
]

logger = logging.getLogger(__name__)

#: Fields of MLE-bench's ``CompetitionReport`` (``mlebench/grade_helpers.py``), in its order.
MLEBENCH_REPORT_FIELDS: tuple[str, ...] = (
    "competition_id",
    "score",
    "gold_threshold",
    "silver_threshold",
    "bronze_threshold",
    "median_threshold",
    "any_medal",
    "gold_medal",
    "silver_medal",
    "bronze_medal",
    "above_median",
    "submission_exists",
    "valid_submission",
    "is_lower_better",
    "created_at",
    "submission_path",
)

class InvalidSubmissionError(ValueError):
    """A submission that cannot be graded (MLE-bench ``grade_helpers.InvalidSubmissionError``).

    Raised by grading functions; :func:`grade_submission` turns it into an invalid report.
    """


class GradingReport(BaseModel):
    """One graded submission: MLE-bench's ``CompetitionReport`` fields plus ``error``.

    The first sixteen fields are exactly MLE-bench's (``mlebench/grade_helpers.py``
    ``CompetitionReport``), so reports aggregate the same way. ``error`` is mcgs's own: why
    the submission is missing or invalid, ``None`` when it was graded.
    """

    model_config = ConfigDict(frozen=True)

    competition_id: str
    score: float | None
    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    submission_exists: bool
    valid_submission: bool
    is_lower_better: bool
    created_at: datetime
    submission_path: str
    # --- mcgs extra (not in MLE-bench's CompetitionReport) ---
    error: str | None = None

    def to_dict(self, *, mlebench_only: bool = False) -> dict[str, Any]:
        """JSON-compatible dict, ``created_at`` as ISO 8601 (as MLE-bench's ``to_dict``).

        Args:
            mlebench_only: Drop ``error`` and return exactly MLE-bench's sixteen keys.

        Returns:
            The report as plain Python values.
        """
        data = self.model_dump(mode="json")
        if mlebench_only:
            return {key: data[key] for key in MLEBENCH_REPORT_FIELDS}
        return data


# --- medal thresholds ------------------------------------------------------------------------


def medal_ranks(n_teams: int) -> tuple[int, int, int]:
    """1-based leaderboard ranks whose scores are the gold, silver and bronze thresholds.

    Kaggle's progression rule as MLE-bench applies it (``mlebench/grade_helpers.py``
    ``Grader.rank_score.get_thresholds``; ``int`` truncates, ranks are at least 1):

    ========================  ===================  ==============  ==============
    teams N                   gold                 silver          bronze
    ========================  ===================  ==============  ==============
    1 <= N < 100              max(1, int(0.1 N))   max(1, 0.2 N)   max(1, 0.4 N)
    100 <= N < 250            10                   int(0.2 N)      int(0.4 N)
    250 <= N < 1000           10 + int(0.002 N)    50              100
    N >= 1000                 10 + int(0.002 N)    int(0.05 N)     int(0.1 N)
    ========================  ===================  ==============  ==============

    Args:
        n_teams: Number of teams on the leaderboard.

    Returns:
        ``(gold_rank, silver_rank, bronze_rank)``.

    Raises:
        ValueError: when ``n_teams < 1``.
    """
    n = int(n_teams)
    if n < 1:
        raise ValueError(f"a leaderboard needs at least one team, got {n_teams}")
    if n < 100:
        return max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 250:
        return 10, max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 1000:
        return 10 + int(n * 0.002), 50, 100
    return 10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1))


def medal_thresholds(scores: Iterable[float], lower_is_better: bool) -> dict[str, float]:
    """Gold, silver, bronze and median thresholds of a leaderboard.

    The scores are sorted best first in the metric's direction (stable; missing scores
    last) and the threshold for rank ``r`` is the score at index ``r - 1``; the median is the
    median of the non-missing scores. MLE-bench (``Grader.rank_score``) indexes the
    leaderboard as stored, which Kaggle sorts best first, so the two agree on every
    leaderboard MLE-bench ships. As in MLE-bench, N counts every row, including rows
    without a score.

    Args:
        scores: One leaderboard score per team, in any order.
        lower_is_better: The metric's direction.

    Returns:
        ``{"gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold"}``
        as floats.

    Raises:
        ValueError: when ``scores`` is empty.
    """
    ordered = (
        pd.Series(list(scores), dtype=float)
        .sort_values(ascending=lower_is_better, kind="stable", na_position="last")
        .reset_index(drop=True)
    )
    gold, silver, bronze = medal_ranks(len(ordered))
    return {
        "gold_threshold": float(ordered.iloc[gold - 1]),
        "silver_threshold": float(ordered.iloc[silver - 1]),
        "bronze_threshold": float(ordered.iloc[bronze - 1]),
        "median_threshold": float(ordered.median()),
    }


def medals_for_score(
    score: float | None, thresholds: dict[str, float], lower_is_better: bool
) -> dict[str, bool]:
    """Medals and above-median flag earned by a score.

    MLE-bench ``Grader.rank_score``: a threshold is reached when the score is at least as good
    (ties count); medals are exclusive (gold, else silver, else bronze); ``above_median`` needs
    a strictly better score. ``None`` (no valid submission) earns nothing.

    Args:
        score: The submission's score, or ``None``.
        thresholds: Output of :func:`medal_thresholds`.
        lower_is_better: The metric's direction.

    Returns:
        ``{"gold_medal", "silver_medal", "bronze_medal", "any_medal", "above_median"}``.
    """
    if score is None:
        return dict.fromkeys(
            ("gold_medal", "silver_medal", "bronze_medal", "any_medal", "above_median"), False
        )

    def reaches(threshold: float) -> bool:
        return score <= threshold if lower_is_better else score >= threshold

    gold = reaches(thresholds["gold_threshold"])
    silver = not gold and reaches(thresholds["silver_threshold"])
    bronze = not gold and not silver and reaches(thresholds["bronze_threshold"])
    median = thresholds["median_threshold"]
    above_median = score < median if lower_is_better else score > median
    return {
        "gold_medal": bool(gold),
        "silver_medal": bool(silver),
        "bronze_medal": bool(bronze),
        "any_medal": bool(gold or silver or bronze),
        "above_median": bool(above_median),
    }


# --- grading functions (signature: fn(submission, answers, spec) -> float) -------------------


def align_submission(
    submission: pd.DataFrame,
    answers: pd.DataFrame,
    *,
    id_column: str,
    target_columns: Sequence[str],
    optional_columns: Sequence[str] = (),
    values: Literal["any", "number", "probability"] = "any",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Check a submission against the answers and align its rows to them by id.

    The checks are :func:`mcgs.submission_check.submission_problems`, the engine's own, so a
    submission the engine accepted is graded. They follow MLE-bench ``mlebench/competitions/
    utils.py`` (``prepare_for_accuracy_metric``, ``prepare_for_auroc_metric``: required
    columns, same length, same ids once sorted) and are stricter in two ways: a column other
    than the id and target(s) is rejected, and a missing prediction (NaN) is reported as such
    (MLE-bench's grader fails on it with a scikit-learn error, which also makes the submission
    invalid). Every problem found is reported in one message.

    When ``id_column`` repeats in the answers (detecting-insults keys rows by comment text),
    ids are compared as multisets and, as MLE-bench's ``prepare_for_auroc_metric`` does, both
    frames are sorted by the id (stably, so repeated ids keep their order) and paired row by
    row.

    Args:
        submission: The submission as read from CSV.
        answers: The answers file (MLE-bench's private ``test.csv``).
        id_column: Column matching submission rows to answer rows.
        target_columns: Prediction column(s) the submission must have.
        optional_columns: Column(s) the submission may also have (ignored when grading).
        values: What the prediction cells must hold (see :class:`SubmissionRules`).

    Returns:
        ``(y_true, y_pred)``: the answers' and the submission's target columns, row ``i`` of
        both belonging to the same id; numeric when ``values`` asks for numbers.

    Raises:
        InvalidSubmissionError: naming the missing or unexpected columns, the missing,
            duplicate or unknown ids, the ids with a NaN prediction, or non-numeric values.
    """
    for col in [id_column, *target_columns]:
        if col not in answers.columns:  # a broken answers file is our bug, not the agent's
            raise MLEBenchError(f"answers file has no {col!r} column; re-run prepare_competition")
    repeated = bool(answers[id_column].duplicated().any())
    rules = SubmissionRules(key=id_column, predictions=tuple(target_columns), optional=tuple(optional_columns),
                            repeated_keys=repeated, values=values)
    problems = submission_problems(submission, answers, rules)
    if problems:
        raise InvalidSubmissionError("; ".join(problems))
    targets = list(target_columns)
    if repeated:
        y_pred = submission.sort_values(id_column, kind="stable")[targets].reset_index(drop=True)
        y_true = answers.sort_values(id_column, kind="stable")[targets].reset_index(drop=True)
    else:
        order = answers[id_column].to_numpy()
        y_pred = submission.set_index(id_column).loc[order, targets].reset_index(drop=True)
        y_true = answers[targets].reset_index(drop=True)
    if values != "any":
        y_pred = y_pred.apply(pd.to_numeric)
    return y_true, y_pred


def grade_accuracy(
    submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec
) -> float:
    """Classification accuracy of a single-target submission.

    Source: MLE-bench ``mlebench/competitions/spaceship-titanic/grade.py`` (rows matched by
    id via ``prepare_for_accuracy_metric``, then ``sklearn.metrics.accuracy_score``).

    Args:
        submission: The submission as read from CSV.
        answers: The answers file.
        spec: The competition (gives the id and target column).

    Returns:
        Accuracy in [0, 1], unrounded.

    Raises:
        InvalidSubmissionError: see :func:`align_submission`.
    """
    (target,) = spec.targets
    y_true, y_pred = align_submission(
        submission, answers, id_column=spec.id_column, target_columns=[target]
    )
    return get_metric("accuracy").score(y_true[target].to_numpy(), y_pred[target].to_numpy())


def grade_auc_roc(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec) -> float:
    """ROC AUC of a binary-probability submission.

    Source: MLE-bench ``mlebench/competitions/{random-acts-of-pizza,
    detecting-insults-in-social-commentary}/grade.py``: ``prepare_for_auroc_metric`` (key and
    target columns present, same length, numeric predictions in [0, 1], same keys once sorted
    by key), then ``sklearn.metrics.roc_auc_score``. The key is ``spec.key_column``
    (``request_id`` for pizza, ``Comment`` for insults). Columns of the answers file other
    than key and target (insults' ``Date``, which its sample submission carries) may be
    present; mcgs rejects any other extra column, which MLE-bench ignores.

    Args:
        submission: The submission as read from CSV.
        answers: The answers file.
        spec: The competition (key and target column).

    Returns:
        ROC AUC in [0, 1], unrounded.

    Raises:
        InvalidSubmissionError: naming the missing/unexpected columns, the missing, duplicate
            or unknown keys, or the keys whose prediction is not a probability.
    """
    (target,) = spec.targets
    key = spec.key_column
    optional = [c for c in answers.columns if c not in (key, target)]
    y_true, y_pred = align_submission(submission, answers, id_column=key, target_columns=[target],
                                      optional_columns=optional, values="probability")
    return get_metric("roc_auc").score(y_true[target].to_numpy(), y_pred[target].to_numpy())


def grade_mean_column_rmsle(
    submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec
) -> float:
    """Mean over the target columns of the root mean squared log error.

    Source: MLE-bench ``mlebench/competitions/nomad2018-predict-transparent-conductors/
    grade.py``: ``(rmsle(formation) + rmsle(bandgap)) / 2`` with
    ``sklearn.metrics.root_mean_squared_log_error`` on the raw predictions (no clipping; a
    value scikit-learn refuses, <= -1, makes the submission invalid).

    mcgs is stricter than MLE-bench in one way: MLE-bench pairs submission and answer rows by
    position and needs no id column; mcgs requires the ``id`` column and pairs rows by id
    (:func:`align_submission`). A submission whose rows are in the answers' order (the order
    of the public test and the sample submission) gets exactly MLE-bench's score.

    Args:
        submission: The submission as read from CSV.
        answers: The answers file.
        spec: The competition (id and target columns).

    Returns:
        Mean column-wise RMSLE (>= 0), unrounded.

    Raises:
        InvalidSubmissionError: see :func:`align_submission`; also non-numeric predictions or
            predictions <= -1, naming column and ids.
    """
    from sklearn.metrics import root_mean_squared_log_error

    targets = list(spec.targets)
    y_true, values = align_submission(
        submission, answers, id_column=spec.key_column, target_columns=targets, values="number"
    )
    ids = answers[spec.key_column].reset_index(drop=True)
    problems: list[str] = []
    for col in targets:
        too_low = values[col] <= -1
        if too_low.any():
            problems.append(
                f"{col!r} has {int(too_low.sum())} prediction(s) <= -1, where RMSLE is "
                f"undefined, for {spec.key_column}(s) {preview(ids[too_low].tolist())}"
            )
    if problems:
        raise InvalidSubmissionError("; ".join(problems))
    per_column = [
        root_mean_squared_log_error(y_true[col].to_numpy(float), values[col].to_numpy(float))
        for col in targets
    ]
    return float(sum(per_column) / len(per_column))


def grade_one_hot_log_loss(
    submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec
) -> float:
    """Multi-class log loss of a submission with one probability column per class.

    Source: MLE-bench ``mlebench/competitions/{leaf-classification,
    spooky-author-identification}/grade.py`` and ``mlebench/competitions/utils.py``
    ``one_hot_dfs_to_log_loss_inputs``: exactly the columns ``id`` + the classes, as many rows
    as the answers, every row summing to 1 within ``atol=1e-6``, every value in [0, 1], the
    same ids once sorted; then ``sklearn.metrics.log_loss(y_true_one_hot, y_pred)`` with no
    softmax, which clips probabilities to ``[eps, 1 - eps]`` (``eps`` of float64) and
    renormalises each row before taking logs.

    Args:
        submission: The submission as read from CSV.
        answers: The one-hot answers file (``id`` + one 0/1 column per class).
        spec: The competition (id column and ``classes``).

    Returns:
        Log loss (>= 0), unrounded.

    Raises:
        InvalidSubmissionError: naming missing or unexpected columns, missing, duplicate or
            unknown ids, and ids whose row is not a probability distribution.
    """
    from sklearn.metrics import log_loss

    classes = list(spec.classes)
    key = spec.key_column
    y_true, values = align_submission(
        submission, answers, id_column=key, target_columns=classes, values="number"
    )
    ids = answers[key].reset_index(drop=True)
    problems: list[str] = []
    off = ~np.isclose(values.sum(axis=1), 1, atol=1e-6)
    if off.any():
        problems.append(
            f"each row's {len(classes)} class probabilities must sum to 1 (within 1e-6); "
            f"{int(off.sum())} row(s) do not, {key}(s) {preview(ids[off].tolist())}"
        )
    outside = ((values < 0) | (values > 1)).any(axis=1)
    if outside.any():
        bad_cols = [c for c in classes if ((values[c] < 0) | (values[c] > 1)).any()]
        problems.append(
            f"probabilities must be in [0, 1]; {int(outside.sum())} row(s) are not, "
            f"{key}(s) {preview(ids[outside].tolist())}, column(s) {preview(bad_cols)}"
        )
    if problems:
        raise InvalidSubmissionError("; ".join(problems))
    return float(log_loss(y_true[classes].to_numpy(float), values[classes].to_numpy(float)))


# --- driver ----------------------------------------------------------------------------------


def grade_submission(competition_id: str, submission: Path, data_dir: Path) -> GradingReport:
    """Grade one submission CSV against a prepared competition.

    Mirrors MLE-bench ``mlebench/grade.py`` ``grade_csv``: a missing file, or one not ending
    in ``.csv``, gives ``submission_exists=False``; a submission the grader rejects gives
    ``valid_submission=False``; in both cases ``score`` is ``None``, no medal is earned and
    ``error`` says why. Valid scores are rounded to 5 decimals (``Grader.__call__``).

    The metric's direction comes from the mcgs metric registry (config key ``metric``, else
    ``grader.name``); when mcgs does not know the metric it is inferred from the leaderboard
    as MLE-bench does (``Grader.is_lower_better``: first score < last score).

    Args:
        competition_id: MLE-bench competition id, e.g. ``spaceship-titanic``.
        submission: Path to the submission CSV.
        data_dir: Folder holding ``<competition_id>/`` as written by
            :func:`mcgs.mlebench.prepare.prepare_competition`.

    Returns:
        The grading report.

    Raises:
        MLEBenchError: unknown competition, or the competition is not prepared in
            ``data_dir`` (missing ``config.yaml``, answers or ``leaderboard.csv``).
    """
    spec = get_competition(competition_id)
    comp_dir = Path(data_dir) / competition_id
    config = load_competition_config(comp_dir, competition_id)
    answers_path = comp_dir / config["dataset"]["answers"]
    if not answers_path.is_file():
        raise MLEBenchError(
            f"answers file {answers_path} is missing; prepare the competition again: "
            f"`mcgs mlebench prepare {competition_id} --raw RAW_DIR --out {Path(data_dir)}`"
        )
    leaderboard = _load_leaderboard(comp_dir, competition_id)
    lower_is_better = _is_lower_better(config, leaderboard, competition_id)
    thresholds = medal_thresholds(leaderboard["score"], lower_is_better)

    submission = Path(submission)
    score: float | None = None
    error: str | None = None
    submission_exists = submission.is_file() and submission.suffix.lower() == ".csv"
    if not submission_exists:
        error = (
            f"submission file {submission} does not exist"
            if not submission.is_file()
            else f"submission file {submission} is not a .csv file"
        )
    else:
        score, error = _score(spec, submission, read_csv(answers_path))
    if error is not None:
        logger.warning("invalid submission for %s: %s", competition_id, error)

    medals = medals_for_score(score, thresholds, lower_is_better)
    return GradingReport(
        competition_id=competition_id,
        score=score,
        **thresholds,
        **medals,
        submission_exists=submission_exists,
        valid_submission=score is not None,
        is_lower_better=lower_is_better,
        created_at=datetime.now(timezone.utc),
        submission_path=str(submission),
        error=error,
    )


def _score(
    spec: CompetitionSpec, submission: Path, answers: pd.DataFrame
) -> tuple[float | None, str | None]:
    """Run the competition's grader; ``(score, None)`` or ``(None, reason)``."""
    try:
        frame = read_csv(submission)
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame()  # MLE-bench read_csv returns an empty frame here too
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        return None, f"submission {submission} is not a readable CSV: {exc}"
    try:
        raw = spec.load_grade_fn()(frame, answers, spec)
    except InvalidSubmissionError as exc:
        return None, str(exc)
    except MLEBenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLE-bench Grader.__call__: any failure is invalid
        logger.debug("grader %s failed", spec.grade_fn, exc_info=True)
        return None, f"grader failed on the submission: {type(exc).__name__}: {exc}"
    if raw is None or not math.isfinite(float(raw)):
        return None, f"grader returned a non-finite score {raw!r}"
    return round(float(raw), 5), None


def load_competition_config(comp_dir: Path, competition_id: str) -> dict[str, Any]:
    """The prepared competition's config (``comp_dir/config.yaml`` as ``mcgs mlebench prepare``
    writes it, MLE-bench's competition config layout: ``dataset.answers`` and so on).

    Raises:
        MLEBenchError: the competition is not prepared in ``comp_dir``, or the config is for
            another competition; the message gives the command that prepares it.
    """
    path = comp_dir / CONFIG_FILE
    if not path.is_file():
        raise MLEBenchError(
            f"competition {competition_id!r} is not prepared in {comp_dir.parent}: {path} is "
            f"missing; prepare it: `mcgs mlebench prepare {competition_id} --raw RAW_DIR --out {comp_dir.parent}`"
        )
    config = yaml.safe_load(path.read_text()) or {}
    if config.get("id") != competition_id:
        raise MLEBenchError(
            f"{path} is for competition {config.get('id')!r}, not {competition_id!r}; "
            f"prepare it again: `mcgs mlebench prepare {competition_id} --raw RAW_DIR --out {comp_dir.parent}`"
        )
    return config


def _load_leaderboard(comp_dir: Path, competition_id: str) -> pd.DataFrame:
    path = comp_dir / LEADERBOARD_FILE
    if not path.is_file():
        raise MLEBenchError(
            f"leaderboard {path} for {competition_id!r} is missing; re-run prepare_competition"
        )
    # MLE-bench mlebench/data.py get_leaderboard reads it with plain pd.read_csv.
    leaderboard = pd.read_csv(path)
    if "score" not in leaderboard.columns or leaderboard.empty:
        raise MLEBenchError(f"leaderboard {path} has no rows or no 'score' column")
    return leaderboard


def _is_lower_better(
    config: dict[str, Any], leaderboard: pd.DataFrame, competition_id: str
) -> bool:
    """Direction from the metric registry, falling back to the leaderboard's order."""
    scores = leaderboard["score"].dropna().to_numpy(dtype=float)
    inferred = bool(scores[0] < scores[-1]) if len(scores) else False
    name = config.get("metric") or (config.get("grader") or {}).get("name", "")
    try:
        lower = not get_metric(name).higher_is_better
    except UnknownMetricError:
        logger.info(
            "metric %r of %s is not in mcgs.metrics; direction taken from the leaderboard "
            "(lower_is_better=%s)",
            name,
            competition_id,
            inferred,
        )
        return inferred
    if len(scores) and not np.isclose(scores[0], scores[-1]) and inferred != lower:
        logger.warning(
            "leaderboard of %s is sorted as if lower_is_better=%s but metric %r says %s; "
            "using the metric",
            competition_id,
            inferred,
            name,
            lower,
        )
    return lower
