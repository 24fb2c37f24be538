"""The bundled demo task, built at run time from scikit-learn's copy of the Wisconsin
breast-cancer data set (569 rows, 30 numeric features; Street, Wolberg & Mangasarian 1993,
UCI ML repository). No data file is committed: the tables are written from
``sklearn.datasets.load_breast_cancer``, which scikit-learn ships.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["build_demo_task", "grade_demo_submission"]

_TASK_YAML = """\
# Demo task written by `mcgs demo` from scikit-learn's breast-cancer data set.
name: breast-cancer-demo
metric: roc_auc
description: >
  Predict whether a breast mass is malignant from 30 measurements of cell nuclei in a
  digitised image of a fine-needle aspirate. Submit the probability that the diagnosis is
  malignant; submissions are scored by ROC AUC.
positive_class: malignant
"""


def build_demo_task(folder: str | Path, test_size: float = 0.25, seed: int = 0) -> Path:
    """Write the demo task (train.csv, test.csv, sample_submission.csv, task.yaml, and the
    held-out answers in ``private/answers.csv``, which the search never reads).

    Args:
        folder: Where to write it (created).
        test_size: Share of rows held out as the test set.
        seed: Split seed.

    Returns:
        The task folder.
    """
    import numpy as np
    import pandas as pd
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    folder = Path(folder)
    if folder.is_dir() and any(folder.iterdir()) and not _is_demo_task(folder):
        raise ValueError(
            f"{folder} already holds files that are not the demo task's; the demo writes train.csv, test.csv and "
            f"task.yaml there, so give --out a new folder, e.g. {folder.parent / 'demo_run'}"
        )
    folder.mkdir(parents=True, exist_ok=True)
    data = load_breast_cancer(as_frame=True)
    frame = data.frame.copy()
    frame.columns = [c.replace(" ", "_") for c in frame.columns]
    frame.insert(0, "id", np.arange(1, len(frame) + 1))
    # In scikit-learn's copy, target 0 = malignant, 1 = benign.
    frame["diagnosis"] = np.where(frame.pop("target") == 0, "malignant", "benign")
    train, test = train_test_split(frame, test_size=test_size, random_state=seed, stratify=frame["diagnosis"])
    train.to_csv(folder / "train.csv", index=False)
    test.drop(columns=["diagnosis"]).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], "diagnosis": 0.5}).to_csv(folder / "sample_submission.csv", index=False)
    private = folder / "private"
    private.mkdir(exist_ok=True)
    test[["id", "diagnosis"]].to_csv(private / "answers.csv", index=False)
    (folder / "task.yaml").write_text(_TASK_YAML)
    return folder


def grade_demo_submission(task_dir: str | Path, submission: str | Path) -> float:
    """The held-out test ROC AUC of a submission to the demo task, from the answers
    :func:`build_demo_task` kept in ``private/answers.csv`` (which the search never reads).

    Args:
        task_dir: The demo task folder.
        submission: A submission CSV (``id``, ``diagnosis`` = probability of malignant).

    Returns:
        ROC AUC in [0, 1], higher is better.
    """
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    answers = pd.read_csv(Path(task_dir) / "private" / "answers.csv")
    sub = pd.read_csv(submission).merge(answers, on="id", suffixes=("_pred", ""))
    return float(roc_auc_score(sub["diagnosis"] == "malignant", sub["diagnosis_pred"]))


def _is_demo_task(folder: Path) -> bool:
    """Whether ``folder`` is a demo task written earlier (its task.yaml is the demo's own)."""
    names = {"train.csv", "test.csv", "sample_submission.csv", "task.yaml", "private"}
    yaml = folder / "task.yaml"
    return {p.name for p in folder.iterdir()} <= names and yaml.is_file() and yaml.read_text() == _TASK_YAML
