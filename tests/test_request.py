"""Request -> task spec (the AutoML-Agent front end, offline): a table of requests over real
data folders, each giving the right task spec or a clear list of what is missing."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from mcgs.request import RequestError, find_metrics, parse_request, task_from_request

HOUSE = "house-prices-advanced-regression-techniques/raw"
SPACE = "spaceship-titanic/raw"
OBESITY = "playground-series-s4e2/raw"
BIKES = "bike-sharing-demand/raw"
INSULTS = "detecting-insults-in-social-commentary/raw"

# (data folder, request, expected spec fields) -- plain requests and requests with constraints
GOOD = [
    (SPACE, "Predict whether each passenger was Transported; judged by accuracy.",
     dict(task_kind="binary", target_columns=["Transported"], id_column="PassengerId", metric="accuracy", validation="stratified_kfold")),
    (HOUSE, "Build me a model for the house prices.",  # metric from overview.txt: RMSE of the logs
     dict(task_kind="regression", target_columns=["SalePrice"], id_column="Id", metric="rmsle", validation="kfold")),
    (HOUSE, "Predict SalePrice by RMSE; it must be interpretable and answer in under 2 ms per row.",
     dict(task_kind="regression", metric="rmse", constraints=dict(interpretable=True, max_inference_ms_per_row=2.0, max_model_mb=None))),
    (OBESITY, "Predict the obesity class NObeyesdad.",
     dict(task_kind="multiclass", target_columns=["NObeyesdad"], id_column="id", metric="accuracy", n_classes=7)),
    (OBESITY, "Classify NObeyesdad with accuracy; the model file must stay below 50 MB.",
     dict(task_kind="multiclass", metric="accuracy", submission_format="label", constraints=dict(interpretable=False, max_inference_ms_per_row=None, max_model_mb=50.0))),
    (BIKES, "Forecast the hourly rental count; score with RMSLE.",
     dict(task_kind="regression", target_columns=["count"], id_column="datetime", metric="rmsle", validation="time_split")),
    (INSULTS, "Predict Insult for each comment, evaluated by AUC.",
     dict(task_kind="binary", target_columns=["Insult"], id_column="id", metric="roc_auc", submission_format="probability")),
]

# (data folder, request, {field: words the problem must contain}) -- wrong or missing facts
BAD = [
    (BIKES, "Forecast hourly bike rentals.", {"metric": "do not say how results are judged", "target": "casual, registered, count"}),
    (SPACE, "Predict HomePlanet with accuracy.", {"target": "the test table has that column"}),
    (SPACE, "Predict Transported, scored by RMSE.", {"metric": "yes/no labels"}),
    (BIKES, "Predict count with log loss.", {"metric": "822 distinct values"}),
    (SPACE, "Predict Transported; report accuracy and AUC.", {"metric": "several metrics"}),
    (HOUSE, "Predict SalePrice, judged by accuracy.", {"metric": "distinct values"}),
    # the sample submission holds one label per row: a probability metric has nothing to score
    (OBESITY, "Classify NObeyesdad with multi-class log loss.", {"metric": "a single column 'NObeyesdad' for its 7 classes"}),
]


@pytest.mark.realdata
@pytest.mark.parametrize("folder, prompt, expected", GOOD, ids=[f"{f.split('/')[0][:20]}-{i}" for i, (f, _, _) in enumerate(GOOD)])
def test_request_becomes_the_right_task_spec(shared_data, tmp_path, folder, prompt, expected):
    spec, parsed = task_from_request(prompt, shared_data / folder, tmp_path / "task")
    assert parsed.ok, parsed.problems
    got = {
        "task_kind": spec.task_kind,
        "target_columns": spec.target_columns,
        "id_column": spec.id_column,
        "metric": spec.metric,
        "validation": spec.validation.kind,
        "n_classes": len(spec.class_labels or []),
        "submission_format": spec.submission_format,
        "constraints": spec.constraints.model_dump(),
    }
    assert {k: got[k] for k in expected} == expected
    # the data folder is linked, never written to; the request is kept with the task
    assert (tmp_path / "task" / spec.train_file).is_symlink()
    assert json.loads((tmp_path / "task" / "request.json").read_text())["prompt"] == prompt


@pytest.mark.realdata
@pytest.mark.parametrize("folder, prompt, expected", BAD, ids=[f"{f.split('/')[0][:20]}-{i}" for i, (f, _, _) in enumerate(BAD)])
def test_wrong_or_missing_facts_are_listed_before_any_search(shared_data, tmp_path, folder, prompt, expected):
    parsed = parse_request(prompt, shared_data / folder)
    by_field = {p.field: f"{p.message} -- {p.fix}" for p in parsed.problems}
    assert set(by_field) == set(expected), parsed.problems
    for f, words in expected.items():
        assert words in by_field[f]
    with pytest.raises(RequestError):
        task_from_request(prompt, shared_data / folder, tmp_path / "task")
    assert not (tmp_path / "task").exists()  # nothing written for a request that cannot run


def test_metric_words_and_markdown_links():
    assert find_metrics("Submissions are evaluated on [Root-Mean-Squared-Error (RMSE)](https://x.org/a.b) between the logarithm of the predicted value") == ["rmsle"]
    assert find_metrics("the score is the average of the individual AUC of each predicted column") == ["mean_column_roc_auc"]
    assert find_metrics("multi-class log loss") == ["log_loss"]
    assert find_metrics("macro-F1, not accuracy") == ["f1_macro", "accuracy"]
    assert find_metrics("Predict the price") == []


def test_cli_request_and_run_from_a_prompt(tmp_path):
    from mcgs.cli import app

    rng = pd.Series(range(300))
    data = tmp_path / "data"
    data.mkdir()
    train = pd.DataFrame({"id": rng, "x": rng % 7, "z": (rng * 3) % 11, "y": (rng % 7 > 3).astype(int)})
    train.to_csv(data / "train.csv", index=False)
    train.drop(columns="y").assign(id=rng + 1000).head(50).to_csv(data / "test.csv", index=False)
    runner = CliRunner()
    bad = runner.invoke(app, ["request", "make a model", "--data", str(data)])
    assert bad.exit_code == 2 and "metric" in bad.output and "Traceback" not in bad.output
    ok = runner.invoke(app, ["request", "predict y, judged by ROC AUC", "--data", str(data)])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output[ok.output.index("{"):])["metric"] == "roc_auc"
    both = runner.invoke(app, ["run", str(data), "--prompt", "predict y", "--data", str(data), "--out", str(tmp_path / "r")])
    assert both.exit_code == 2 and "not both" in both.output
    run = runner.invoke(app, ["run", "--prompt", "predict y, judged by ROC AUC", "--data", str(data), "--out", str(tmp_path / "run"), "--max-nodes", "1", "--time-budget", "3m"])
    assert run.exit_code == 0, run.output
    assert (tmp_path / "run" / "best" / "submission.csv").is_file()
    sub = pd.read_csv(tmp_path / "run" / "best" / "submission.csv")
    assert list(sub.columns) == ["id", "y"] and len(sub) == 50
    assert sorted(p.name for p in data.iterdir()) == ["test.csv", "train.csv"]  # the data folder untouched


def test_unreadable_table_is_a_request_problem_not_a_crash(tmp_path):
    (tmp_path / "train.csv").write_bytes(bytes(range(256)) * 2)
    (tmp_path / "test.csv").write_bytes(bytes(range(256)) * 2)
    parsed = parse_request("predict y by auc", tmp_path)
    assert [p.field for p in parsed.problems] == ["data"]
    assert "cannot be read as CSV or JSON" in parsed.problems[0].message and "UTF-8 CSV" in parsed.problems[0].fix
