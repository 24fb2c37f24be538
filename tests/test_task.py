"""Task loading: inference from sample_submission.csv and clear errors for bad folders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from mcgs.contract import build_task_json, make_folds
from mcgs.task import TaskError, load_task


# The outputs of a candidate for write_task's binary task, standard library only (``task`` and
# ``col`` set before): constant OOF and test predictions and a submission of "yes".
WRITE_OUTPUTS = '''
os.makedirs("working", exist_ok=True)
os.makedirs("submission", exist_ok=True)
rows = [r["row"] for r in csv.DictReader(open("input/folds.csv")) if int(r["fold"]) >= 0]
with open("working/oof.csv", "w") as f:
    f.write("row," + col + "\\n" + "".join(f"{r},0.5\\n" for r in rows))
test = list(csv.DictReader(open(task["files"]["test"]["path"])))
with open("working/test_pred.csv", "w") as f:
    f.write("row," + col + "\\n" + "".join(f"{i},0.5\\n" for i in range(len(test))))
with open("submission/submission.csv", "w") as f:
    f.write(task["id_column"] + "," + col + "\\n" + "".join(r[task["id_column"]] + ",yes\\n" for r in test))
'''


def write_task(folder: Path, *, task: dict | None, n: int = 60, target="label", id_col="pid", labels=("no", "yes")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = range(n)
    train = pd.DataFrame({id_col: [f"{i:04d}_01" for i in rows], "x": [i % 7 for i in rows], "cat": ["a", "b", "c"] * (n // 3), target: [labels[i % 2] for i in rows]})
    test = pd.DataFrame({id_col: [f"{i:04d}_02" for i in range(20)], "x": range(20), "cat": ["a", "b"] * 10})
    sample = pd.DataFrame({id_col: test[id_col], target: labels[0]})
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sample.to_csv(folder / "sample_submission.csv", index=False)
    if task is not None:
        (folder / "task.yaml").write_text(yaml.safe_dump(task))
    return folder


def test_infers_target_and_id_from_sample_submission(tmp_path):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "accuracy"}))
    assert spec.target_columns == ["label"]
    assert spec.id_column == "pid"
    assert spec.task_kind == "binary"
    assert spec.class_labels == ["no", "yes"]
    assert spec.positive_class == "yes"
    assert spec.submission_format == "label"
    assert spec.higher_is_better is True
    assert spec.validation.kind == "stratified_kfold"


@pytest.mark.parametrize(
    "name, canonical, higher",
    [("auc-roc", "roc_auc", True), ("multi-class-log-loss", "log_loss", False), ("root-mean-squared-error", "rmse", False), ("accuracy", "accuracy", True)],
)
def test_mlebench_grader_names_are_aliases(tmp_path, name, canonical, higher):
    folder = write_task(tmp_path / "t", task={"metric": name}, labels=(0, 1) if canonical != "rmse" else (1.5, 2.5))
    spec = load_task(folder)
    assert spec.metric == canonical
    assert spec.higher_is_better is higher


@pytest.mark.parametrize("labels, positive", [((0, 1), 1), ((False, True), True), (("no", "yes"), "yes"), (("cat", "dog"), "dog")])
def test_positive_class_defaults(tmp_path, labels, positive):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "roc_auc"}, labels=labels))
    assert spec.positive_class == positive and type(spec.positive_class) is type(positive)


def test_probability_metric_asks_for_probabilities(tmp_path):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "roc_auc"}))
    assert spec.submission_format == "probability"


@pytest.mark.parametrize(
    "task, message",
    [
        (None, "add a task.yaml with at least `metric"),
        ({"target": "label"}, "metric: required"),
        ({"metric": "f2_weird"}, "unknown metric 'f2_weird'"),
        ({"metric": "accuarcy"}, "unknown metric 'accuarcy'; did you mean 'accuracy'?"),
        ({"metric": "accuracy", "target": "nope"}, "target column 'nope' is not in the training file"),
        ({"metric": "accuracy", "id_column": "x"}, "id_column 'x' is not a column of sample_submission.csv"),
        ({"metric": "accuracy", "validation": {"kind": "group_kfold"}}, "needs validation.group_column"),
        ({"metric": "accuracy", "validation": {"kind": "group_kfold", "group_column": "team"}}, "('team' is not one); columns: ['pid', 'x', 'cat', 'label']"),
        ({"metric": "accuracy", "validation": {"kind": "time_split", "time_column": "date"}}, "validation.time_column naming a training column ('date' is not one)"),
        ({"metric": "accuracy", "validation": {"n_splits": 40}}, "fewer than validation.n_splits=40; set validation: {n_splits: 30}"),
        ({"metric": "accuracy", "unknown_key": 1}, "unknown_key: unknown setting"),
        ({"metric": "rmse"}, "regression metric but target 'label' is not numeric"),
    ],
)
def test_bad_task_folders_get_clear_errors(tmp_path, task, message):
    folder = write_task(tmp_path / "t", task=task)
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert message in str(err.value)


def test_one_row_classes_are_named(tmp_path):
    folder = write_task(tmp_path / "u", task={"metric": "accuracy"}, labels=("no", "yes"))
    train = pd.read_csv(folder / "train.csv")
    train.loc[0, "label"] = "maybe"
    train.to_csv(folder / "train.csv", index=False)
    with pytest.raises(TaskError, match=r"1 class\(es\) of 'label' have a single training row \(e.g. \['maybe'\]\); .* merge rare classes"):
        load_task(folder)


def test_target_present_in_test_is_rejected(tmp_path):
    folder = write_task(tmp_path / "t", task={"metric": "accuracy"})
    test = pd.read_csv(folder / "test.csv")
    test["label"] = "no"
    test.to_csv(folder / "test.csv", index=False)
    with pytest.raises(TaskError, match="also in the test file"):
        load_task(folder)


def test_missing_folder_and_row_mismatch(tmp_path):
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "absent")
    folder = write_task(tmp_path / "t", task={"metric": "accuracy"})
    sample = pd.read_csv(folder / "sample_submission.csv").iloc[:5]
    sample.to_csv(folder / "sample_submission.csv", index=False)
    with pytest.raises(TaskError, match="sample_submission.csv has 5 rows but the test file has 20"):
        load_task(folder)


def test_folds_are_stratified_and_cover_every_row(tmp_path):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "accuracy", "validation": {"n_splits": 4}}))
    train = pd.read_csv(spec.train_path)
    folds = make_folds(spec, train)
    assert list(folds["row"]) == list(range(len(train)))
    assert sorted(folds["fold"].unique()) == [0, 1, 2, 3]
    # each fold holds both classes in equal measure (stratified)
    share = train.groupby(folds["fold"])["label"].apply(lambda s: (s == "yes").mean())
    assert share.between(0.4, 0.6).all()
    # same seed, same folds
    assert make_folds(spec, train).equals(folds)


def test_time_split_never_validates_the_first_chunk(tmp_path):
    folder = write_task(tmp_path / "t", task={"metric": "accuracy", "validation": {"kind": "time_split", "time_column": "x", "n_splits": 3}})
    spec = load_task(folder)
    train = pd.read_csv(spec.train_path)
    folds = make_folds(spec, train)
    assert (folds["fold"] == -1).sum() == len(train) // 4  # n_splits + 1 equal chunks
    # validation folds move forward in time
    mins = train.groupby(folds["fold"])["x"].min()
    assert mins.loc[-1] <= mins.loc[0] <= mins.loc[1] <= mins.loc[2]


def test_task_json_follows_schema(tmp_path):
    spec = load_task(write_task(tmp_path / "t", task={"metric": "log_loss"}))
    tj = build_task_json(spec)
    assert tj.contract_version == "1.5"
    assert tj.media is None  # a table task
    assert tj.prediction_columns == ["label"]
    assert tj.files["train"].path == "input/train.csv"
    assert tj.outputs.oof == "working/oof.csv"
