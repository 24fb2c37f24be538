"""Submission validation and engine-side OOF scoring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mcgs.contract import prepare_run_input
from mcgs.evaluation import OutputError, TaskLabels, evaluate_workspace, read_predictions, score_predictions, validate_submission
from mcgs.task import load_task

from test_task import write_task


@pytest.fixture
def task(tmp_path):
    return load_task(write_task(tmp_path / "task", task={"metric": "accuracy"}))


@pytest.fixture
def sample(task):
    return pd.read_csv(task.sample_submission_path, dtype=str, keep_default_na=False)


def good_submission(task) -> pd.DataFrame:
    test = pd.read_csv(task.test_path)
    return pd.DataFrame({"pid": test["pid"], "label": ["yes", "no"] * (len(test) // 2)})


def check(task, sample, tmp_path, df: pd.DataFrame | str):
    path = tmp_path / "submission.csv"
    if isinstance(df, str):
        path.write_text(df)
    else:
        df.to_csv(path, index=False)
    validate_submission(task, sample, tmp_path, "submission.csv")


def test_valid_and_shuffled_submissions_pass(task, sample, tmp_path):
    sub = good_submission(task)
    check(task, sample, tmp_path, sub)
    check(task, sample, tmp_path, sub.sample(frac=1.0, random_state=3))


def test_duplicate_id_is_named(task, sample, tmp_path):
    sub = good_submission(task)
    sub.loc[1, "pid"] = sub.loc[0, "pid"]
    with pytest.raises(OutputError, match=r"duplicate pid\(s\) \['0000_02'\]; missing 1 pid\(s\) \['0001_02'\]"):
        check(task, sample, tmp_path, sub)


def test_missing_id_is_named(task, sample, tmp_path):
    sub = good_submission(task)
    sub.loc[3, "pid"] = "9999_99"
    with pytest.raises(OutputError, match=r"missing 1 pid\(s\) \['0003_02'\]; 1 pid\(s\) not in the test set \['9999_99'\]"):
        check(task, sample, tmp_path, sub)


def test_wrong_row_count(task, sample, tmp_path):
    with pytest.raises(OutputError, match="19 rows, expected 20"):
        check(task, sample, tmp_path, good_submission(task).iloc[:-1])


def test_extra_column_is_named(task, sample, tmp_path):
    sub = good_submission(task)
    sub["proba"] = 0.3
    with pytest.raises(OutputError, match=r"unexpected column\(s\) \['proba'\]"):
        check(task, sample, tmp_path, sub)


def test_nan_is_named_with_its_id(task, sample, tmp_path):
    sub = good_submission(task)
    sub.loc[5, "label"] = np.nan
    with pytest.raises(OutputError, match=r"missing prediction \(NaN\) in 'label' for 1 pid\(s\) \['0005_02'\]"):
        check(task, sample, tmp_path, sub)


def test_label_outside_classes(task, sample, tmp_path):
    sub = good_submission(task)
    sub.loc[2, "label"] = "maybe"
    with pytest.raises(OutputError, match=r"\['maybe'\] that are not class labels"):
        check(task, sample, tmp_path, sub)


def test_probability_out_of_range(tmp_path):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "roc_auc"}))
    sample = pd.read_csv(spec.sample_submission_path, dtype=str, keep_default_na=False)
    test = pd.read_csv(spec.test_path)
    sub = pd.DataFrame({"pid": test["pid"], "label": np.linspace(0, 1.2, len(test))})
    with pytest.raises(OutputError, match=r"probabilities outside \[0, 1\]"):
        check(spec, sample, tmp_path, sub)


def _mutations():
    def duplicate(sub):
        sub.loc[1, "pid"] = sub.loc[0, "pid"]
        return sub

    def unknown(sub):
        sub.loc[3, "pid"] = "9999_99"
        return sub

    def empty(sub):
        sub.loc[[2, 7], "label"] = np.nan
        return sub

    def extra(sub):
        return sub.assign(proba=0.3)

    def short(sub):
        return sub.iloc[:-2]

    def everything(sub):
        return extra(empty(unknown(duplicate(sub)))).iloc[:-1]

    return [duplicate, unknown, empty, extra, short, everything]


@pytest.mark.parametrize("mutate", _mutations(), ids=lambda f: f.__name__)
def test_engine_and_grader_name_the_same_problems(task, sample, tmp_path, mutate):
    """One validator: the engine's check of a candidate and `mcgs mlebench grade`'s check of
    the same file report the same problems, all of them, in the same words."""
    from mcgs.mlebench.grade import InvalidSubmissionError, align_submission
    from mcgs.mlebench.prepare import read_csv

    answers = good_submission(task)
    path = tmp_path / "submission.csv"
    mutate(good_submission(task)).to_csv(path, index=False)
    with pytest.raises(OutputError) as engine:
        validate_submission(task, sample, tmp_path, "submission.csv")
    with pytest.raises(InvalidSubmissionError) as grader:
        align_submission(read_csv(path), answers, id_column="pid", target_columns=["label"])
    engine_problems = str(engine.value).removeprefix("submission.csv: ").split("; ")
    grader_problems = str(grader.value).split("; ")
    assert [p.replace("(as in sample_submission.csv)", "") for p in engine_problems] == [
        p.replace("(as in the answers)", "") for p in grader_problems
    ]
    if mutate.__name__ == "everything":
        assert len(engine_problems) == 6  # every problem at once, not the first one found


def test_missing_file(task, sample, tmp_path):
    with pytest.raises(OutputError, match="was not written"):
        validate_submission(task, sample, tmp_path, "absent.csv")


def test_oof_rows_must_match_folds(task, tmp_path):
    rows = np.arange(10)
    path = tmp_path / "oof.csv"
    pd.DataFrame({"row": [0, 1, 2, 2, 4, 5, 6, 7, 8, 9], "label": 0.5}).to_csv(path, index=False)
    with pytest.raises(OutputError, match=r"duplicate rows \[?2"):
        read_predictions(task, tmp_path, "oof.csv", rows)
    pd.DataFrame({"row": range(9), "label": 0.5}).to_csv(path, index=False)
    with pytest.raises(OutputError, match="missing rows 9"):
        read_predictions(task, tmp_path, "oof.csv", rows)
    pd.DataFrame({"row": range(10), "proba": 0.5}).to_csv(path, index=False)
    with pytest.raises(OutputError, match=r"missing columns \['label'\]"):
        read_predictions(task, tmp_path, "oof.csv", rows)


def test_engine_scores_oof_in_task_direction(task, tmp_path):
    """The workspace's score is recomputed from oof.csv; whatever the program printed is ignored."""
    run = tmp_path / "run"
    run.mkdir()
    inp = prepare_run_input(task, run)
    labels = TaskLabels.load(task, inp / "folds.csv")
    ws = tmp_path / "ws"
    (ws / "working").mkdir(parents=True)
    (ws / "submission").mkdir()
    y = (pd.read_csv(task.train_path)["label"] == "yes").to_numpy()
    p = np.where(y, 0.9, 0.2)
    p[:6] = 1 - p[:6]  # six wrong rows out of 60
    pd.DataFrame({"row": range(len(y)), "label": p}).to_csv(ws / "working/oof.csv", index=False)
    pd.DataFrame({"row": range(task.n_test), "label": 0.4}).to_csv(ws / "working/test_pred.csv", index=False)
    good_submission(task).to_csv(ws / "submission/submission.csv", index=False)
    (ws / "stdout.txt").write_text("validation accuracy: 1.0 (lower is better)\n")
    ev = evaluate_workspace(labels, ws)
    assert ev.score == pytest.approx(54 / 60)
    assert ev.oof.shape == (60, 1)
    assert ev.test_pred.shape == (20, 1)


def test_binary_log_loss_uses_positive_class_probability(tmp_path):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "log_loss"}, labels=("a", "b")))
    y = np.array(["a", "b", "b"])
    p = np.array([[0.8], [0.6], [0.9]])  # binary: probability of positive class "b"
    expected = -(np.log(1 - 0.8) + np.log(0.6) + np.log(0.9)) / 3
    assert score_predictions(spec, y, p) == pytest.approx(expected)
