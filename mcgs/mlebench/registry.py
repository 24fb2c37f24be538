"""Registry of the MLE-bench competitions mcgs can prepare and grade offline.

One :class:`CompetitionSpec` per competition holds what MLE-bench keeps in
``mlebench/competitions/<id>/config.yaml`` (id, name, type, grader name, answers and sample
submission paths) plus the two facts mcgs needs to run the task (target and id column).

The preparer and the grading function are named by import string (``"module:function"``),
as MLE-bench's ``config.yaml`` does (``preparer:`` and ``grader.grade_fn:``). This keeps this
module free of pandas and scikit-learn and free of imports of :mod:`.prepare` and
:mod:`.grade`, which both import it.

Adding a competition (planned: ``nomad2018-predict-transparent-conductors``,
``leaf-classification``, ``random-acts-of-pizza``, ``spooky-author-identification``,
``detecting-insults-in-social-commentary``):

1. write ``prepare_<id>(raw, public, private)`` in :mod:`mcgs.mlebench.prepare`, replicating
   MLE-bench's ``mlebench/competitions/<id>/prepare.py`` byte for byte (the md5 check in
   :func:`~mcgs.mlebench.prepare.prepare_competition` tells you when it does);
2. reuse or write a grading function in :mod:`mcgs.mlebench.grade` with the signature
   ``fn(submission, answers, spec) -> float`` that raises
   :class:`~mcgs.mlebench.grade.InvalidSubmissionError` on a bad submission;
3. add a :class:`CompetitionSpec` to ``_SPECS`` below, and a checksum test.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

__all__ = [
    "MLEBenchError",
    "CompetitionSpec",
    "get_competition",
    "competition_ids",
]


class MLEBenchError(ValueError):
    """Raised for bad inputs to preparation or grading (unknown id, missing folder or file).

    The message names the offending id or path and says how to fix it.
    """


@dataclasses.dataclass(frozen=True)
class CompetitionSpec:
    """Static description of one MLE-bench competition.

    Attributes:
        id: MLE-bench / Kaggle competition id (``spaceship-titanic``).
        name: Human-readable name, as in MLE-bench's ``config.yaml``.
        competition_type: MLE-bench's ``competition_type`` (``simple`` for all of ours).
        grader_name: MLE-bench's ``grader.name``; also accepted by :func:`mcgs.metrics.get_metric`
            when mcgs implements that metric.
        target: Target column, or columns for multi-target tasks.
        id_column: Column that identifies a row in the test set and the submission.
        preparer: ``"module:function"`` called as ``fn(raw=..., public=..., private=...)``
            (MLE-bench's preparer signature, ``mlebench/data.py`` ``is_valid_prepare_fn``).
        grade_fn: ``"module:function"`` called as ``fn(submission, answers, spec) -> float``.
        raw_files: Files that must exist in the raw folder before preparing.
        answers: Answers file, relative to the competition folder.
        sample_submission: Sample submission, relative to the competition folder.
    """

    id: str
    name: str
    competition_type: str
    grader_name: str
    target: str | tuple[str, ...]
    id_column: str
    preparer: str
    grade_fn: str
    raw_files: tuple[str, ...]
    answers: str = "prepared/private/test.csv"
    sample_submission: str = "prepared/public/sample_submission.csv"

    @property
    def targets(self) -> tuple[str, ...]:
        """The target column(s) as a tuple, whether one or several."""
        return (self.target,) if isinstance(self.target, str) else tuple(self.target)

    def load_preparer(self) -> Callable[..., None]:
        """Import and return the preparer function."""
        return _import_callable(self.preparer)

    def load_grade_fn(self) -> Callable[..., float]:
        """Import and return the grading function."""
        return _import_callable(self.grade_fn)

    def to_config(self) -> dict[str, Any]:
        """The ``config.yaml`` written next to the prepared data.

        MLE-bench's keys (``id``, ``name``, ``competition_type``, ``description``, ``dataset``,
        ``grader``) first, with paths relative to the competition folder, then the keys mcgs
        reads to run the task (``target``, ``id_column``, ``metric``).
        """
        return {
            "id": self.id,
            "name": self.name,
            "competition_type": self.competition_type,
            "description": "prepared/public/description.md",
            "dataset": {
                "answers": self.answers,
                "sample_submission": self.sample_submission,
            },
            "grader": {"name": self.grader_name},
            "target": self.target if isinstance(self.target, str) else list(self.target),
            "id_column": self.id_column,
            "metric": self.grader_name,
        }


def _import_callable(ref: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` (MLE-bench ``mlebench/utils.py`` ``import_fn``)."""
    module_name, _, fn_name = ref.partition(":")
    return getattr(importlib.import_module(module_name), fn_name)


_SPECS: dict[str, CompetitionSpec] = {
    spec.id: spec
    for spec in (
        # MLE-bench mlebench/competitions/spaceship-titanic/{config.yaml,prepare.py,grade.py}.
        CompetitionSpec(
            id="spaceship-titanic",
            name="Spaceship Titanic",
            competition_type="simple",
            grader_name="accuracy",
            target="Transported",
            id_column="PassengerId",
            preparer="mcgs.mlebench.prepare:prepare_spaceship_titanic",
            grade_fn="mcgs.mlebench.grade:grade_accuracy",
            raw_files=("train.csv",),
        ),
    )
}


def competition_ids() -> list[str]:
    """Ids of all registered competitions, sorted."""
    return sorted(_SPECS)


def get_competition(competition_id: str) -> CompetitionSpec:
    """Look a competition up by its MLE-bench id.

    Args:
        competition_id: MLE-bench competition id, e.g. ``spaceship-titanic``.

    Returns:
        The competition's spec.

    Raises:
        MLEBenchError: when the id is not registered; the message lists the known ids.
    """
    try:
        return _SPECS[competition_id]
    except KeyError:
        raise MLEBenchError(
            f"unknown MLE-bench competition {competition_id!r}; known competitions: "
            f"{', '.join(competition_ids())}. Register new ones in mcgs/mlebench/registry.py."
        ) from None
