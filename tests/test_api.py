"""The library facade (issue 9): `import mcgs` is silent and light, create/run/load round trip,
callbacks with frozen nodes, the nodes DataFrame, user-defined metrics, and the examples in
docs/api.md run as written."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mcgs
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task

FAST = RecipeCoder(models=("model.logistic_regression",))  # the search, not the models, is under test

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "sklearn", "lightgbm", "anthropic", "catboost", "xgboost")


def test_import_mcgs_prints_nothing_and_loads_no_heavy_library():
    code = "import sys, mcgs; print(sorted(m for m in %r if m in sys.modules))" % (HEAVY,)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout == "[]\n"  # nothing printed by the import, no heavy module loaded
    res = subprocess.run([sys.executable, "-c", "import mcgs; mcgs.create_search; mcgs.load_search; mcgs.SearchSettings"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout == "" and res.stderr == ""


def test_create_run_read_and_load_round_trip(tmp_path):
    task = build_demo_task(tmp_path / "task")
    seen = []
    search = mcgs.create_search(
        task=task, run_dir=tmp_path / "runs" / "a", coder=FAST, policy="greedy",
        callbacks=[lambda s, node: seen.append(node)], plan_candidates=0, ensemble=False, seed=3, node_timeout_share=1.0,
    )
    assert search.settings.policy == "greedy" and search.settings.seed == 3
    final = search.run(time_budget="3m", max_nodes=2)
    assert final is not None and final.id == search.best_node.id
    assert [n.seq for n in seen] == [1, 2] and all(isinstance(n, mcgs.FrozenNode) for n in seen)
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].score = 1.0  # snapshots: reading never changes the search

    df = search.nodes_dataframe()
    assert list(df["seq"]) == [1, 2] and list(df["state"]) == ["valid", "valid"]
    assert df.loc[df["score"].idxmax(), "seq"] == search.best_node.seq
    assert df["score"].tolist() == pytest.approx([n.score for n in seen])
    assert {"parent_seq", "operator", "runtime_s", "attempts", "owner", "created_at"} <= set(df.columns)

    by_url = mcgs.load_search(f"sqlite:///{tmp_path / 'runs' / 'a' / 'mcgs.db'}", coder=FAST)
    by_dir = mcgs.load_search(tmp_path / "runs" / "a")
    for loaded in (by_url, by_dir):
        assert loaded.run_record.status == "finished" and loaded.run_record.name == "a"
        pd.testing.assert_frame_equal(loaded.nodes_dataframe(), df)
    # the budget and node limit given to run() are stored: a resume with a larger limit adds one node
    assert by_url.settings.max_nodes == 2 and by_url.settings.time_budget_s == 180
    by_url.run(max_nodes=3)
    assert len(by_url.nodes_dataframe()) == 3
    # a total budget below the time already spent: said, not silently nothing
    said: list[str] = []
    by_dir = mcgs.load_search(tmp_path / "runs" / "a", coder=FAST)
    by_dir.say = said.append
    by_dir.run(time_budget=1, max_nodes=10)
    assert any("the time budget of 1 s is spent" in m and "larger total budget" in m for m in said), said
    assert len(by_dir.nodes_dataframe()) == 3


def test_bad_arguments_are_clear_errors(tmp_path):
    task = build_demo_task(tmp_path / "task")
    with pytest.raises(ValueError, match="policy must be one of mcgs, tree, greedy"):
        mcgs.create_search(task=task, run_dir=tmp_path / "r1", policy="beam")
    with pytest.raises(ValueError, match="coder must be one of"):
        mcgs.create_search(task=task, run_dir=tmp_path / "r2", coder="gpt")
    with pytest.raises(ValueError, match="unknown setting.*time_budget"):
        mcgs.create_search(task=task, run_dir=tmp_path / "r3", time_budget="10m")
    with pytest.raises(mcgs.RunError, match="no mcgs run"):
        mcgs.load_search(tmp_path / "nowhere")
    with pytest.raises(mcgs.RunError, match="give run_dir"):
        mcgs.load_search("postgresql+psycopg://nobody@/nothing")
    with pytest.raises(mcgs.TaskError, match=r"task.yaml is a file; give the task folder that holds it"):
        mcgs.load_task(task / "task.yaml")
    with pytest.raises(mcgs.RunError, match="lies inside the task folder"):
        mcgs.create_search(task=task, run_dir=task / "run")
    assert not (task / "run").exists() and not (task / "mcgs.db").exists()
    with pytest.raises(ValueError, match="fn must be a function"):
        mcgs.register_metric("not_a_function", 42, higher_is_better=True)
    # a folder of someone's files is refused untouched (a run writes nodes/, best/, input/ there)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept")
    with pytest.raises(mcgs.RunError, match=r"already holds files that are not an mcgs run's \(notes.txt\)"):
        mcgs.create_search(task=task, run_dir=tmp_path / "mine", coder=FAST)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    # a failed creation leaves the folder as it was: trying again with good arguments works
    (tmp_path / "empty").mkdir()
    with pytest.raises(TypeError):  # fails in the constructor, after the run record was written
        mcgs.create_search(task=task, run_dir=tmp_path / "empty", coder=FAST, callbacks=5)
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
    again = mcgs.create_search(task=task, run_dir=tmp_path / "empty", coder=FAST, settings={"seed": 4}, callbacks=lambda s, n: None)
    assert again.settings.seed == 4 and len(again.callbacks) == 1


    class WritesText:  # a user's coder that returns the program text instead of a CoderAnswer
        def write(self, request):
            return "print('hello')"

    wrong = mcgs.create_search(task=task, run_dir=tmp_path / "r4", coder=WritesText(), plan_candidates=0)
    with pytest.raises(TypeError, match=r"WritesText.write returned a str; it must return mcgs.CoderAnswer"):
        wrong.run(time_budget="1m", max_nodes=1)
    assert mcgs.load_search(tmp_path / "r4").run_record.status == "stopped"


@pytest.fixture
def metric_registry():
    """Restore the metric registry after the test (registrations are process-wide)."""
    from mcgs import metrics

    saved = dict(metrics._REGISTRY)
    yield
    metrics._REGISTRY.clear()
    metrics._REGISTRY.update(saved)


def test_a_registered_metric_scores_the_oof_predictions(tmp_path, metric_registry):
    def neg_brier(y_true, y_pred, **_):
        return -float(np.mean((np.asarray(y_true, dtype=float) - y_pred) ** 2))

    mcgs.register_metric("neg_brier_test", neg_brier, higher_is_better=True, needs_proba=True, replace=True)
    with pytest.raises(ValueError, match="built in"):
        mcgs.register_metric("roc_auc", neg_brier, higher_is_better=True)
    with pytest.raises(ValueError, match="already registered"):
        mcgs.register_metric("neg_brier_test", neg_brier, higher_is_better=True)
    task = build_demo_task(tmp_path / "task")
    yaml = task / "task.yaml"
    yaml.write_text(yaml.read_text().replace("metric: roc_auc", "metric: neg_brier_test"))
    search = mcgs.create_search(task=task, run_dir=tmp_path / "run", coder=FAST, plan_candidates=0, ensemble=False, node_timeout_share=1.0)
    search.run(time_budget="2m", max_nodes=1)
    node = search.best_node
    oof = pd.read_csv(search.run_dir / node.workspace / "working" / "oof.csv").sort_values("row")
    train = pd.read_csv(task / "train.csv")
    y = (train[search.task.target_columns[0]].astype(str) == str(search.task.positive_class)).astype(float).to_numpy()[oof["row"]]
    assert node.score == pytest.approx(-np.mean((y - oof[search.task.target_columns[0]].to_numpy()) ** 2))
    # another process that did not register the metric is told so when it loads the run, before
    # a candidate is spent on it
    from mcgs import metrics

    del metrics._REGISTRY["neg_brier_test"]
    with pytest.raises(mcgs.RunError, match=r"metric 'neg_brier_test' is not registered in this process; call mcgs.register_metric"):
        mcgs.load_search(search.run_dir)


def _python_blocks(md: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", md.read_text(), flags=re.S)


@pytest.mark.slow
def test_the_examples_in_docs_api_md_run_as_written(tmp_path):
    blocks = _python_blocks(REPO / "docs" / "api.md")
    assert len(blocks) == 5
    env = {**os.environ, "MCGS_ENSEMBLE": "false", "MCGS_NODE_TIMEOUT_SHARE": "1.0"}  # no timeouts on a loaded machine
    for i, code in enumerate(blocks):
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
        assert res.returncode == 0, f"example {i + 1} failed:\n{res.stderr[-3000:]}"
    assert (tmp_path / "runs" / "demo" / "best" / "submission.csv").is_file()
    assert "brier skill:" in res.stdout


def test_a_call_made_outside_the_coder_goes_to_the_runs_ledger_and_the_demo_is_graded_on_held_out_answers(tmp_path):
    """What the CLI does through the library: ``mcgs run --prompt`` records its request reading
    with Search.record_llm_call, and ``mcgs demo`` grades the submission with
    mcgs.demo.grade_demo_submission on answers the search never read."""
    from mcgs.llm.client import CallUsage

    task = build_demo_task(tmp_path / "task")
    search = mcgs.create_search(task, run_dir=tmp_path / "run", coder=FAST, time_budget_s=600)
    search.record_llm_call("request", "request", CallUsage(model="claude-sonnet-4-5", input_tokens=1000, output_tokens=200))
    search.storage.close()
    (call,) = mcgs.load_run(tmp_path / "run").llm_calls
    assert (call.operator, call.kind, call.output_tokens) == ("request", "request", 200) and call.cost_usd > 0
    answers = pd.read_csv(task / "private" / "answers.csv")
    perfect = answers.assign(diagnosis=(answers["diagnosis"] == "malignant").astype(float))
    perfect.to_csv(tmp_path / "perfect.csv", index=False)
    assert mcgs.demo.grade_demo_submission(task, tmp_path / "perfect.csv") == 1.0
    perfect.assign(diagnosis=1.0 - perfect["diagnosis"]).to_csv(tmp_path / "inverted.csv", index=False)
    assert mcgs.demo.grade_demo_submission(task, tmp_path / "inverted.csv") == 0.0
