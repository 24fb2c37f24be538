"""Offline MLE-bench: rebuild a competition's prepared split and grade submissions.

Two entry points, both wired to the ``mcgs mlebench`` CLI:

* :func:`prepare_competition` replays MLE-bench's ``prepare.py`` on Kaggle's raw files and
  checks the result against MLE-bench's ``checksums.yaml``;
* :func:`grade_submission` scores a submission CSV against the prepared answers and ranks it
  on the Kaggle leaderboard as MLE-bench does, returning a :class:`GradingReport`.

Competitions are registered in :mod:`mcgs.mlebench.registry` (see :func:`competition_ids`).
"""

from .grade import (
    GradingReport,
    InvalidSubmissionError,
    grade_submission,
    medal_ranks,
    medal_thresholds,
    medals_for_score,
)
from .prepare import ChecksumMismatchError, prepare_competition
from .registry import CompetitionSpec, MLEBenchError, competition_ids, get_competition

__all__ = [
    "prepare_competition",
    "grade_submission",
    "GradingReport",
    "medal_ranks",
    "medal_thresholds",
    "medals_for_score",
    "CompetitionSpec",
    "competition_ids",
    "get_competition",
    "MLEBenchError",
    "ChecksumMismatchError",
    "InvalidSubmissionError",
]
