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
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict

from ..metrics import UnknownMetricError, get_metric
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
    "grade_submission",
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

_PREVIEW = 5  # ids or columns quoted in an error message before "(+N more)"


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


def _preview(values: Sequence[Any]) -> str:
    """``['a', 'b', 'c'] (+7 more)`` for error messages."""
    values = list(values)
    head = ", ".join(repr(v) for v in values[:_PREVIEW])
    more = f" (+{len(values) - _PREVIEW} more)" if len(values) > _PREVIEW else ""
    return f"[{head}]{more}"


def align_submission(
    submission: pd.DataFrame,
    answers: pd.DataFrame,
    *,
    id_column: str,
    target_columns: Sequence[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Check a submission against the answers and align its rows to them by id.

    Follows MLE-bench ``mlebench/competitions/utils.py`` ``prepare_for_accuracy_metric``
    (required columns, same length, same ids once sorted), and is stricter in two ways: a
    column other than the id and target(s) is rejected, and a missing prediction (NaN) is
    reported as such (MLE-bench's grader fails on it with a scikit-learn error, which also
    makes the submission invalid). Every problem found is reported in one message.

    Args:
        submission: The submission as read from CSV.
        answers: The answers file (MLE-bench's private ``test.csv``).
        id_column: Column matching submission rows to answer rows.
        target_columns: Prediction column(s) the submission must have.

    Returns:
        ``(y_true, y_pred)``: the answers' and the submission's target columns, row ``i`` of
        both belonging to the same id, in the answers' order.

    Raises:
        InvalidSubmissionError: naming the missing or unexpected columns, the missing,
            duplicate or unknown ids, or the ids with a NaN prediction.
    """
    required = [id_column, *target_columns]
    for col in required:
        if col not in answers.columns:  # a broken answers file is our bug, not the agent's
            raise MLEBenchError(f"answers file has no {col!r} column; re-run prepare_competition")

    if submission.empty:
        raise InvalidSubmissionError(
            f"submission is empty; expected {len(answers)} rows with columns {required}"
        )
    missing_cols = [c for c in required if c not in submission.columns]
    if missing_cols:
        raise InvalidSubmissionError(
            f"submission is missing column(s) {missing_cols}; expected exactly {required}, "
            f"got {list(submission.columns)}"
        )

    problems: list[str] = []
    extra_cols = [c for c in submission.columns if c not in required]
    if extra_cols:
        problems.append(f"unexpected column(s) {extra_cols}; expected exactly {required}")
    if len(submission) != len(answers):
        problems.append(f"submission has {len(submission)} rows, the answers have {len(answers)}")

    ids = submission[id_column]
    if ids.isna().any():
        problems.append(f"{int(ids.isna().sum())} row(s) have an empty {id_column}")
    dup = ids[ids.duplicated(keep=False) & ids.notna()].unique()
    if len(dup):
        problems.append(f"duplicate {id_column}(s) {_preview(dup)}")
    answer_ids = answers[id_column]
    missing_ids = answer_ids[~answer_ids.isin(ids)].tolist()
    if missing_ids:
        problems.append(f"missing {len(missing_ids)} {id_column}(s) {_preview(missing_ids)}")
    unknown_ids = ids[ids.notna() & ~ids.isin(answer_ids)].unique().tolist()
    if unknown_ids:
        problems.append(
            f"{len(unknown_ids)} {id_column}(s) not in the test set {_preview(unknown_ids)}"
        )
    for col in target_columns:
        nan_rows = submission[col].isna()
        if nan_rows.any():
            problems.append(
                f"missing prediction (NaN) in {col!r} for {int(nan_rows.sum())} "
                f"{id_column}(s) {_preview(ids[nan_rows].tolist())}"
            )
    if problems:
        raise InvalidSubmissionError("; ".join(problems))

    order = answer_ids.to_numpy()
    y_pred = submission.set_index(id_column).loc[order, list(target_columns)].reset_index(drop=True)
    y_true = answers[list(target_columns)].reset_index(drop=True)
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
    config = _load_config(comp_dir, competition_id)
    answers_path = comp_dir / config["dataset"]["answers"]
    if not answers_path.is_file():
        raise MLEBenchError(
            f"answers file {answers_path} is missing; re-run prepare_competition("
            f"{competition_id!r}, raw_dir, {Path(data_dir)})"
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


def _load_config(comp_dir: Path, competition_id: str) -> dict[str, Any]:
    path = comp_dir / CONFIG_FILE
    if not path.is_file():
        raise MLEBenchError(
            f"competition {competition_id!r} is not prepared in {comp_dir.parent}: {path} is "
            f"missing; run prepare_competition({competition_id!r}, raw_dir, {comp_dir.parent})"
        )
    config = yaml.safe_load(path.read_text()) or {}
    if config.get("id") != competition_id:
        raise MLEBenchError(
            f"{path} is for competition {config.get('id')!r}, not {competition_id!r}; "
            f"re-run prepare_competition({competition_id!r}, ...)"
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
