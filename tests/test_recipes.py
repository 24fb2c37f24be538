"""The knowledge base loads by schema, and every model recipe renders into a program that
runs and honours the solution contract for every task kind it claims."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from mcgs.coders import CoderRequest
from mcgs.coders.recipe import COST_PARAMS, FEATURE_ORDER, RecipeCoder, render_program
from mcgs.contract import prepare_run_input, prepare_workspace
from mcgs.evaluation import TaskLabels, evaluate_workspace
from mcgs.knowledge_base import KnowledgeBaseError, load_entries, retrieve
from mcgs.node import FrozenNode, NodeState, Operator
from mcgs.profile import profile_task
from mcgs.task import load_task


def mixed_table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Spaceship-like columns with meaningless names: compound ids, booleans with gaps,
    categoricals, skewed amounts, missing values."""
    group = rng.integers(0, n // 2, n)
    df = pd.DataFrame(
        {
            "key": [f"{g:04d}_{i:04d}" for i, g in enumerate(group)],
            "flag": rng.choice(["True", "False", None], n, p=[0.45, 0.45, 0.1]),
            "code": [f"{'ABC'[k % 3]}/{k}/{'PS'[k % 2]}" for k in rng.integers(0, 300, n)],
            "kind": rng.choice(["x", "y", "z"], n),
            "amount_a": np.where(rng.random(n) < 0.6, 0.0, rng.exponential(500, n)),
            "amount_b": np.where(rng.random(n) < 0.6, 0.0, rng.exponential(800, n)),
            "level": rng.normal(30, 10, n).round(),
        }
    )
    df.loc[rng.random(n) < 0.05, "level"] = np.nan
    return df


def make_task(folder, kind: str, n: int = 240, metric: str | None = None):
    rng = np.random.default_rng(0)
    df = mixed_table(n + 60, rng)
    signal = (df["amount_a"] > 0).astype(float) + (df["kind"] == "x") + rng.normal(0, 0.5, len(df))
    if kind == "binary":
        df["target"] = np.where(signal > 1.0, True, False)
        targets, metric = ["target"], metric or "accuracy"
    elif kind == "multiclass":
        df["target"] = np.select([signal < 0.6, signal < 1.4], ["low", "mid"], "high")
        targets, metric = ["target"], metric or "log_loss"
    elif kind == "regression":
        df["target"] = 10 + 5 * signal
        targets, metric = ["target"], metric or "rmse"
    else:
        df["t1"] = np.exp(signal)
        df["t2"] = 3 + signal**2
        targets, metric = ["t1", "t2"], metric or "rmsle"
    folder.mkdir(parents=True)
    train, test = df.iloc[:n], df.iloc[n:].drop(columns=targets)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sample = pd.DataFrame({"key": test["key"]})
    if kind == "multiclass" and metric == "log_loss":
        for c in ("high", "low", "mid"):
            sample[c] = 1 / 3
    else:
        for t in targets:
            sample[t] = train[t].iloc[0]
    sample.to_csv(folder / "sample_submission.csv", index=False)
    spec = {"metric": metric, "validation": {"n_splits": 3}}
    if kind == "multiclass":
        spec["target"] = "target"
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return load_task(folder)


def test_knowledge_base_loads_and_every_entry_has_a_source():
    entries = load_entries()
    assert len(entries) >= 12
    assert len({e.id for e in entries}) == len(entries)
    for e in entries:
        assert e.source.strip() and e.guidance.strip()
    assert sum(e.recipe is not None and e.recipe.kind == "model" for e in entries) >= 5


def test_malformed_entry_is_named(tmp_path):
    (tmp_path / "bad.yaml").write_text("id: x\nlevel: model\ntitle: t\nguidance: g\n")
    with pytest.raises(KnowledgeBaseError, match="bad.yaml"):
        load_entries(str(tmp_path))


def run_config(tmp_path, spec, config, name):
    prof = profile_task(spec)
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    inp = prepare_run_input(spec, run)
    code, ids = render_program(config, title="test", plan="test", profile=prof)
    compile(code, "solution.py", "exec")
    ws = prepare_workspace(inp, tmp_path / name, code)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return evaluate_workspace(TaskLabels.load(spec, inp / "folds.csv"), ws), ids


KINDS = ["binary", "multiclass", "regression", "multi_target_regression"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_recipe_runs_and_follows_the_contract(tmp_path, kind):
    spec = make_task(tmp_path / "task", kind)
    prof = profile_task(spec)
    coder = RecipeCoder()
    models = retrieve(prof, recipe_kind="model")
    assert len(models) >= 5
    for entry in models:
        config = coder.default_config(entry.id, prof)
        config["features"] = {f: True for f in FEATURE_ORDER}
        for p in COST_PARAMS:  # keep the test fast
            if p in config["params"]:
                config["params"][p] = 40
        if "n_estimators" in config["params"] and entry.id == "model.random_forest":
            config["params"]["n_estimators"] = 30
        ev, ids = run_config(tmp_path, spec, config, entry.id)
        assert entry.id in ids and "data.split_compound_strings" in ids
        assert np.isfinite(ev.score)
        assert ev.test_pred.shape == (spec.n_test, len(spec.prediction_columns))


def test_profile_sees_column_kinds_not_names(tmp_path):
    prof = profile_task(make_task(tmp_path / "t", "binary"))
    assert prof["columns"] == {
        "flag": "boolean",
        "code": "string",
        "kind": "categorical",
        "amount_a": "numeric",
        "amount_b": "numeric",
        "level": "numeric",
    }
    assert prof["n_train"] == 240 and prof["n_classes"] == 2


def test_drafts_differ_in_kind_and_improve_changes_one_thing(tmp_path):
    spec = make_task(tmp_path / "t", "binary")
    prof = profile_task(spec)
    coder = RecipeCoder(seed=0)
    drafts = []
    for k in range(5):
        ans = coder.write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=prof, siblings=tuple(drafts), seed=k))
        drafts.append(FrozenNode(id=k + 1, seq=k + 1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.8, config=ans.config))
    assert len({d.config["model"] for d in drafts}) == 5
    parent = drafts[1]
    kids = []
    for k in range(3):
        ans = coder.write(CoderRequest(operator=Operator.IMPROVE, task=spec, profile=prof, parent=parent, siblings=tuple(kids), seed=10 + k, tier=0))
        kids.append(FrozenNode(id=10 + k, seq=10 + k, parent_id=parent.id, operator=Operator.IMPROVE, state=NodeState.VALID, config=ans.config))
        changed = {p for p in ans.config["params"] if ans.config["params"][p] != parent.config["params"][p]}
        assert ans.config["change"].startswith("param:")
        assert changed and changed <= {ans.config["change"].split(":")[1], "n_estimators", "iterations", "max_iter"}
    assert len({k.config["change"] for k in kids}) == 3  # siblings do not repeat a change
    feat = coder.write(CoderRequest(operator=Operator.IMPROVE, task=spec, profile=prof, parent=parent, seed=20, tier=1))
    assert feat.config["change"].startswith("feature:")
    strat = coder.write(CoderRequest(operator=Operator.IMPROVE, task=spec, profile=prof, parent=parent, seed=21, tier=2))
    assert strat.config["change"].startswith("strategy:")


def test_debug_maps_failures_to_fixes(tmp_path):
    spec = make_task(tmp_path / "t", "binary")
    prof = profile_task(spec)
    coder = RecipeCoder()
    cfg = coder.default_config("model.catboost", prof)
    slow = FrozenNode(id=1, seq=1, parent_id=0, operator=Operator.DRAFT, state=NodeState.TIMEOUT, config=cfg, error="timed out after 300.0 s")
    fix = coder.write(CoderRequest(operator=Operator.DEBUG, task=spec, profile=prof, parent=slow, seed=1))
    assert fix.config["model"] == "model.lightgbm" and fix.config["change"] == "debug:timeout"
    missing = FrozenNode(id=2, seq=2, parent_id=0, operator=Operator.DRAFT, state=NodeState.BUGGY, config=cfg, error="ModuleNotFoundError: No module named 'catboost'")
    fix = coder.write(CoderRequest(operator=Operator.DEBUG, task=spec, profile=prof, parent=missing, seed=2))
    assert fix.config["model"] != "model.catboost"
    good = FrozenNode(id=3, seq=3, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.8, config=cfg)
    broken = FrozenNode(id=4, seq=4, parent_id=3, operator=Operator.IMPROVE, state=NodeState.BUGGY, config=cfg | {"n_seeds": 3}, error="ValueError: boom")
    fix = coder.write(CoderRequest(operator=Operator.DEBUG, task=spec, profile=prof, parent=broken, lineage=(good,), seed=3))
    assert fix.config["change"] == "debug:revert" and fix.config["n_seeds"] == 1
