"""Task shapes beyond one clean CSV: JSON records with list cells, train-only and test-only fields, no id
column, echoed submission columns, extra input folders."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from mcgs.coders.recipe import RecipeCoder, render_program
from mcgs.contract import prepare_run_input, prepare_workspace
from mcgs.evaluation import TaskLabels, evaluate_workspace
from mcgs.profile import profile_task
from mcgs.task import TaskError, load_task


def json_task(folder, n=200):
    rng = np.random.default_rng(1)
    records = []
    for i in range(n + 50):
        k = int(rng.integers(0, 5))
        records.append(
            {
                "request_id": f"t3_{i:05d}",
                "text": "please help " * k + "pizza",
                "tags": ["food", "help"][: k % 3],
                "account_age": float(rng.exponential(100)),
                "votes_at_retrieval": int(rng.integers(0, 50)),  # train-only: known only afterwards
                "got_pizza": bool(k >= 3 or rng.random() < 0.2),
            }
        )
    folder.mkdir(parents=True)
    train = records[:n]
    # test-only: a field the training records lack (a batch number added when the test was cut)
    test = [{**{k: v for k, v in r.items() if k not in ("votes_at_retrieval", "got_pizza")}, "test_batch": i % 3} for i, r in enumerate(records[n:])]
    (folder / "train.json").write_text(json.dumps(train))
    (folder / "test.json").write_text(json.dumps(test))
    pd.DataFrame({"request_id": [r["request_id"] for r in test], "got_pizza": 0}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "roc_auc", "train_file": "train.json", "test_file": "test.json"}))
    return folder


def run_lightgbm(spec, tmp_path):
    prof = profile_task(spec)
    config = RecipeCoder().default_config("model.lightgbm", prof)
    config["params"]["n_estimators"] = 50
    code, _ = render_program(config, title="t", plan="t", profile=prof)
    inp = prepare_run_input(spec, tmp_path / "run")
    ws = prepare_workspace(inp, tmp_path / "ws", code)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return evaluate_workspace(TaskLabels.load(spec, inp / "folds.csv"), ws), ws, r.stdout


def test_json_records_with_train_only_fields(tmp_path):
    spec = load_task(json_task(tmp_path / "task"))
    assert spec.target_columns == ["got_pizza"] and spec.id_column == "request_id"
    assert spec.class_labels == [False, True] and spec.positive_class is True
    prof = profile_task(spec)
    assert prof["train_only_columns"] == ["votes_at_retrieval"]
    assert prof["columns"]["tags"] in ("categorical", "string")
    tj = json.loads((prepare_run_input(spec, tmp_path / "r0") / "task.json").read_text())
    assert tj["files"]["train"] == {"path": "input/train.json", "format": "json"}
    ev, ws, out = run_lightgbm(spec, tmp_path)
    assert 0.5 < ev.score <= 1.0
    # the train-only column never became a feature, and the test-only one did not break the program
    code = (ws / "solution.py").read_text()
    assert "votes_at_retrieval" not in code and "test_batch" not in code
    assert "votes_at_retrieval" not in prof["columns"] and "test_batch" not in prof["columns"]


def test_no_id_column_with_echoed_columns(tmp_path):
    rng = np.random.default_rng(2)
    n = 160
    df = pd.DataFrame({"Date": [f"2012{i:04d}" for i in range(n + 40)], "Comment": rng.choice(["you idiot", "nice point", "thanks"], n + 40)})
    df["Insult"] = (df["Comment"] == "you idiot").astype(int)
    folder = tmp_path / "task"
    folder.mkdir()
    df.iloc[:n].to_csv(folder / "train.csv", index=False)
    test = df.iloc[n:].drop(columns=["Insult"])
    test.to_csv(folder / "test.csv", index=False)
    sample = test.assign(Insult=0)[["Insult", "Date", "Comment"]]
    sample.to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "auc-roc", "target": "Insult", "no_id_column": True}))
    spec = load_task(folder)
    assert spec.id_column is None and spec.echo_columns == ["Date", "Comment"]
    ev, ws, _ = run_lightgbm(spec, tmp_path)
    sub = pd.read_csv(ws / "submission" / "submission.csv")
    assert list(sub.columns) == ["Insult", "Date", "Comment"]
    assert (sub["Comment"].to_numpy() == test["Comment"].to_numpy()).all()  # matched by row order


def test_extra_folder_is_copied_read_only_and_described(tmp_path):
    folder = tmp_path / "task"
    from test_task import write_task

    write_task(folder, task=None)
    (folder / "geometry").mkdir()
    (folder / "geometry" / "1.xyz").write_text("atom 0 0 0 Ga\n")
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "accuracy", "extra_files": ["geometry"]}))
    spec = load_task(folder)
    assert spec.extra_files == ["geometry"]
    inp = prepare_run_input(spec, tmp_path / "run")
    assert (inp / "geometry" / "1.xyz").read_text().startswith("atom")
    assert not (inp / "geometry" / "1.xyz").stat().st_mode & 0o222
    assert json.loads((inp / "task.json").read_text())["extra_files"] == ["input/geometry"]
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "accuracy", "extra_files": ["absent"]}))
    with pytest.raises(TaskError, match="extra_files entry 'absent'"):
        load_task(folder)


def test_undeclared_files_stay_out_of_plain_tasks(tmp_path):
    from test_task import write_task

    folder = write_task(tmp_path / "task", task={"metric": "accuracy"})
    (folder / "answers.csv").write_text("pid,label\n")
    spec = load_task(folder)
    assert spec.extra_files == []
    inp = prepare_run_input(spec, tmp_path / "run")
    assert not (inp / "answers.csv").exists()


def test_text_column_gets_a_text_recipe(tmp_path):
    rng = np.random.default_rng(3)
    good = ["thanks a lot for the kind help", "what a lovely and useful answer", "great point well made friend"]
    bad = ["you are a complete idiot", "shut up you stupid troll", "what an idiotic dumb comment"]
    n = 300
    label = rng.integers(0, 2, n + 60)
    filler = [f"w{k}" for k in range(200)]  # neutral words make every comment distinct
    text = [f"{rng.choice(bad if y else good)} {' '.join(rng.choice(filler, 3))}" for y in label]
    df = pd.DataFrame({"id": range(n + 60), "comment": text, "label": label})
    folder = tmp_path / "task"
    folder.mkdir()
    df.iloc[:n].to_csv(folder / "train.csv", index=False)
    df.iloc[n:].drop(columns=["label"]).to_csv(folder / "test.csv", index=False)
    df.iloc[n:][["id"]].assign(label=0.5).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "roc_auc"}))
    spec = load_task(folder)
    prof = profile_task(spec)
    assert prof["columns"]["comment"] == "text" and prof["n_text"] == 1
    coder = RecipeCoder()
    from mcgs.coders import CoderRequest
    from mcgs.node import Operator

    draft = coder.write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=prof, seed=0))
    assert draft.config["model"] in ("model.naive_bayes_text", "model.tfidf_linear")  # text first: strong, cheap baselines
    inp = prepare_run_input(spec, tmp_path / "run")
    ws = prepare_workspace(inp, tmp_path / "ws", draft.code)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert evaluate_workspace(TaskLabels.load(spec, inp / "folds.csv"), ws).score > 0.95
