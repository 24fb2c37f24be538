"""The knowledge base loads by schema, and every model recipe renders into a program that
runs and honours the solution contract for every task kind it claims."""

from __future__ import annotations

import dataclasses

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from mcgs.knowledge_base import KnowledgeBaseError, load_entries, retrieve

from mcgs.coders import CoderRequest, config_key
from mcgs.coders.recipe import COST_PARAMS, FEATURE_ORDER, RecipeCoder
from mcgs.node import FrozenNode, NodeState, Operator
from mcgs.profile import profile_task
from mcgs.task import load_task
from recipe_runs import make_task, run_recipe


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


KINDS = ["binary", "multiclass", "multilabel", "regression", "multi_target_regression"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_every_model_recipe_runs_and_follows_the_contract(tmp_path, kind):
    spec = make_task(tmp_path / "task", kind)
    prof = profile_task(spec)
    coder = RecipeCoder()
    models = retrieve(prof, recipe_kind="model")
    assert len(models) >= 5
    for entry in models:
        config = _every_block_few_rounds(coder, entry, prof, 40)
        if "n_estimators" in config["params"] and entry.id == "model.random_forest":
            config["params"]["n_estimators"] = 30
        ev, _, ids = run_recipe(spec, config, tmp_path / entry.id)
        assert entry.id in ids and "data.split_compound_strings" in ids
        assert np.isfinite(ev.score)
        assert ev.test_pred.shape == (spec.n_test, len(spec.prediction_columns))
        if kind == "binary":  # the feature blocks are shared by every kind; lags: the test below
            _predicting_a_few_rows_gives_their_predictions_in_the_full_test_table(spec, tmp_path / entry.id / "ws", entry.id)


def _every_block_few_rounds(coder, entry, prof, rounds):
    """The entry's default config with every feature block on and ``rounds`` rounds or
    iterations (to keep a test fast)."""
    config = coder.default_config(entry.id, prof)
    config["features"] = {f: True for f in FEATURE_ORDER}
    for p in COST_PARAMS:
        if p in config["params"]:
            config["params"][p] = rounds
    return config


def test_on_a_large_table_model_recipes_hold_their_features_as_float32_and_score_as_with_float64(tmp_path, monkeypatch):
    """From FLOAT32_ROWS rows a program casts its numeric features to float32 (lowered here to
    the test table's size): a boosted tree, a bagged tree, a linear and a distance-based model
    (the other recipes take their features as these do) run on all feature blocks and score
    within 0.01 of their float64 runs."""
    import mcgs.coders.recipe_config as recipe_config

    spec = make_task(tmp_path / "task", "binary")
    prof = profile_task(spec)
    coder = RecipeCoder()
    chosen = [e for e in retrieve(prof, recipe_kind="model") if e.id in ("model.lightgbm", "model.random_forest", "model.logistic_regression", "model.knn")]
    assert len(chosen) == 4
    for entry in chosen:
        config = _every_block_few_rounds(coder, entry, prof, 30)
        scores = {}
        for rows in (10**9, 0):
            monkeypatch.setattr(recipe_config, "FLOAT32_ROWS", rows)
            ev, out, _ = run_recipe(spec, config, tmp_path / f"{entry.id}-{rows}")
            code = (tmp_path / f"{entry.id}-{rows}" / "ws" / "solution.py").read_text()
            assert ("astype(np.float32)" in code) == (rows == 0)
            scores[rows] = ev.score
        assert scores[0] == pytest.approx(scores[10**9], abs=0.01), entry.id


def test_every_model_recipe_takes_column_names_with_json_characters(tmp_path):
    """LightGBM refuses feature names with JSON characters ([ ] " : , { }); columns named like
    that (radius[mm]) made every LightGBM draft fail (issue 31): each family must run on them."""
    folder = tmp_path / "task"
    make_task(folder, "binary")
    names = {"amount_a": "radius[mm]", "kind": 'kind:"x",{y}', "level": "level (years)", "amount_b": "radius(mm)"}
    for f in ("train.csv", "test.csv"):
        pd.read_csv(folder / f).rename(columns=names).to_csv(folder / f, index=False)
    spec = load_task(folder)
    prof = profile_task(spec)
    coder = RecipeCoder()
    for entry in retrieve(prof, recipe_kind="model"):
        config = coder.default_config(entry.id, prof)
        config["features"] = {f: True for f in FEATURE_ORDER}
        for p in COST_PARAMS:
            if p in config["params"]:
                config["params"][p] = 40
        if entry.id == "model.random_forest":
            config["params"]["n_estimators"] = 30
        ev, _, _ = run_recipe(spec, config, tmp_path / entry.id)
        assert np.isfinite(ev.score), entry.id


def _predicting_a_few_rows_gives_their_predictions_in_the_full_test_table(spec, ws, model_id):
    """Predict mode (contract 1.1) on three test rows, one of them with a category and a
    compound string no training or test row has: the known rows get exactly the predictions
    they had in the full test table (every feature statistic comes from the run's rows, not
    from the rows sent), and the unseen values do not break the program."""
    test = pd.read_csv(spec.data_dir / spec.test_file)
    rows = [0, 5, 7]
    few = test.iloc[rows].copy()
    odd = test.iloc[[1]].copy()
    odd["kind"], odd["code"] = "never-seen", "Q/99999/Z/extra"
    pd.concat([few, odd]).to_csv(ws / "few.csv", index=False)
    env = {**os.environ, "MCGS_MODE": "predict", "MCGS_MODEL_FILE": "working/model.joblib",
           "MCGS_PREDICT_INPUT": "few.csv", "MCGS_PREDICT_OUTPUT": "few_out.csv"}
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, (model_id, r.stderr[-3000:])
    got = pd.read_csv(ws / "few_out.csv.raw.csv")
    expected = pd.read_csv(ws / "working" / "test_pred.csv").iloc[rows]
    assert len(got) == 4 and np.isfinite(got.drop(columns="row").to_numpy()).all()
    diff = np.abs(got.drop(columns="row").to_numpy()[:3] - expected.drop(columns="row").to_numpy()).max()
    assert diff <= 1e-6, (model_id, diff)


def test_lasso_refits_without_gross_outliers_and_predicts_the_same_rows_when_exported(tmp_path):
    """model.lasso drops fit rows with a residual over trim_sigma robust SDs and fits again:
    six training targets shifted by +40 (noise SD ~2.5) pull a plain fit and not the refit, on
    the untouched rows' OOF predictions; the saved refit predicts a few rows as in the test table."""
    spec = make_task(tmp_path / "task", "regression")
    train = pd.read_csv(spec.data_dir / spec.train_file)
    clean = train["target"].to_numpy().copy()
    shifted = np.random.default_rng(1).choice(len(train), 6, replace=False)
    train.loc[shifted, "target"] += 40.0
    train.to_csv(spec.data_dir / spec.train_file, index=False)
    spec = load_task(spec.data_dir)
    prof = profile_task(spec)
    config = RecipeCoder().default_config("model.lasso", prof)
    assert config["params"]["trim_sigma"] > 0 and config["params"]["clip_sd"] > 0
    errors = {}
    for trim in (0.0, config["params"]["trim_sigma"]):
        ev, _, ids = run_recipe(spec, config | {"params": config["params"] | {"trim_sigma": trim}}, tmp_path / f"trim{trim}")
        assert "model.lasso" in ids
        untouched = np.setdiff1d(np.arange(len(train)), shifted)  # every row is validated (3 folds)
        errors[trim] = float(np.sqrt(np.mean((ev.oof[untouched, 0] - clean[untouched]) ** 2)))
    assert errors[config["params"]["trim_sigma"]] < 0.8 * errors[0.0], errors
    _predicting_a_few_rows_gives_their_predictions_in_the_full_test_table(spec, tmp_path / f"trim{trim}" / "ws", "model.lasso")


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


def test_a_model_s_defaults_follow_the_rows_from_its_scale_params(tmp_path):
    """LightGBM's defaults grow with the data (knowledge entry scale_params: on the suite's 327 k-row
    flights_late the scaled draft scored 0.801 held-out against 0.774, docs/results/scale_params.md);
    the search space, and every smaller task's defaults, stay as they were."""
    from mcgs.coders.recipe_config import default_config
    from mcgs.knowledge_base import get_entry

    prof = profile_task(make_task(tmp_path / "t", "binary"))
    base = dict(get_entry("model.lightgbm").recipe.params)
    assert default_config("model.lightgbm", prof)["params"] == base
    large = default_config("model.lightgbm", prof | {"n_train": 150_000})["params"]
    assert large["num_leaves"] == 127 and large["n_estimators"] == 1500 and large["subsample"] == base["subsample"]
    space = get_entry("model.lightgbm").recipe.space
    assert all(space[k].low <= v <= space[k].high for k, v in large.items() if k in space)


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


def test_drafts_cover_every_family_before_a_second_linear_model(tmp_path):
    """Lasso and ridge are one family (linear): on a regression task the other families get
    their drafts before ridge (the 2026-12-01 ablation's nomad2018 drafts were LightGBM, lasso,
    ridge, ...; the pool then held one strong family)."""
    spec = make_task(tmp_path / "t", "regression")
    prof = profile_task(spec)
    applicable = [e.id for e in retrieve(prof, recipe_kind="model")]
    assert {"model.lasso", "model.ridge"} <= set(applicable)
    coder = RecipeCoder(seed=0)
    drafts = []
    for k in range(len(applicable)):
        ans = coder.write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=prof, siblings=tuple(drafts), seed=k, per_run_timeout_s=600.0))
        drafts.append(FrozenNode(id=k + 1, seq=k + 1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.1, config=ans.config))
    order = [d.config["model"] for d in drafts]
    assert sorted(order) == sorted(applicable)  # every entry is still drafted once
    assert order.index("model.lasso") < order.index("model.ridge")
    assert order[-1] == "model.ridge"  # after every other family
    # a family of its own per entry, unless declared: the lower-priority k-NN comes before ridge
    assert order.index("model.knn") < order.index("model.ridge")


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


def test_fusion_of_identical_blocks_averages_seeds_only_when_they_fit_the_time_limit(tmp_path):
    spec = make_task(tmp_path / "t", "binary")
    prof = profile_task(spec)
    coder = RecipeCoder()
    cfg = coder.default_config("model.catboost", prof)

    def fuse(runtime_s: float):
        a = FrozenNode(id=1, seq=1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.80, config=cfg, runtime_s=runtime_s)
        b = FrozenNode(id=2, seq=2, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.79, config=cfg, runtime_s=runtime_s)
        return coder.write(CoderRequest(operator=Operator.FUSION, task=spec, profile=prof, parent=a, references=(b,), seed=5, per_run_timeout_s=60.0))

    cheap = fuse(runtime_s=5.0)
    assert cheap.config["n_seeds"] == 3 and cheap.config["features"] == cfg["features"]
    slow = fuse(runtime_s=40.0)  # one seed takes 40 s of a 60 s limit: 3 seeds would time out
    assert slow.config["n_seeds"] == 1
    added = {f for f, on in slow.config["features"].items() if on and not cfg["features"].get(f)}
    assert len(added) == 1 and "one seed takes 40s" in slow.plan


def test_merging_a_deterministic_model_with_itself_changes_something_rather_than_repeating_it(tmp_path):
    """Leaf-classification in the ablation: the branch bests were all the same logistic
    regression, and every Aggregate and Fusion of them reproduced the best node exactly (same
    CV and held-out score), since three seeds of a deterministic fit are one fit. The merge
    now adds a feature block, or when every block was tried changes a parameter; the Improve
    strategy tier no longer offers seed averaging for such a model."""
    spec = make_task(tmp_path / "t", "multiclass")
    prof = profile_task(spec)
    coder = RecipeCoder()
    cfg = coder.default_config("model.logistic_regression", prof)
    a = FrozenNode(id=1, seq=1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.30, config=cfg, runtime_s=2.0)
    b = FrozenNode(id=2, seq=2, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.31, config=cfg, runtime_s=2.0)
    agg = coder.write(CoderRequest(operator=Operator.AGGREGATE, task=spec, profile=prof, references=(a, b), seed=5, per_run_timeout_s=60.0))
    assert agg.config["n_seeds"] == 1 and agg.config["features"] != cfg["features"]
    assert "does not depend on its seed" in agg.plan
    every = dict.fromkeys(cfg["features"], True)
    full = [dataclasses.replace(n, config=cfg | {"features": every}) for n in (a, b)]
    agg = coder.write(CoderRequest(operator=Operator.AGGREGATE, task=spec, profile=prof, references=tuple(full), seed=5, per_run_timeout_s=60.0))
    assert agg.config["n_seeds"] == 1 and agg.config["params"] != cfg["params"]
    for k in range(12):
        imp = coder.write(CoderRequest(operator=Operator.IMPROVE, task=spec, profile=prof, parent=a, seed=k, tier=2))
        assert imp.config.get("n_seeds", 1) == 1 and imp.config["change"] != "strategy:seed_averaging"


def test_a_program_the_graph_already_has_is_not_proposed_again(tmp_path):
    """House prices in the ablation: each time the search stagnated, Aggregate merged the same
    branch bests into the same lasso (up to six identical nodes, identical CV and held-out
    score). With the graph's configs in ``tried``, the coder takes one step from that program
    instead, says which node it would have repeated, and the step is itself new."""
    spec = make_task(tmp_path / "t", "regression")
    prof = profile_task(spec)
    coder = RecipeCoder()
    lasso = coder.default_config("model.lasso", prof)
    gbm = coder.default_config("model.lightgbm", prof) | {"features": dict.fromkeys(lasso["features"], False)}
    a = FrozenNode(id=1, seq=1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.12, config=lasso, runtime_s=2.0)
    b = FrozenNode(id=2, seq=2, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.13, config=gbm, runtime_s=2.0)

    def aggregate(tried):
        return coder.write(CoderRequest(operator=Operator.AGGREGATE, task=spec, profile=prof, references=(a, b), seed=5, per_run_timeout_s=60.0, tried=tried))

    first = aggregate({config_key(n.config): n.seq for n in (a, b)})
    assert first.config["model"] == "model.lasso" and "up to its seed" not in first.plan  # new: proposed as planned
    tried = {config_key(n.config): n.seq for n in (a, b)} | {config_key(first.config): 7}
    again = aggregate(tried)
    assert config_key(again.config) not in tried
    assert again.config["model"] == "model.lasso"  # still the merge's program, one step away
    assert "node 7's (up to its seed)" in again.plan and again.config["change"].startswith("aggregate:merge+")
    # a seed is not a new program: the same config with another seed counts as tried
    assert config_key(first.config | {"seed": 99}) == config_key(first.config)
    # Debug that reverts to the last valid config of the lineage gets a step from it instead
    failed = FrozenNode(id=3, seq=3, parent_id=1, operator=Operator.IMPROVE, state=NodeState.BUGGY, config=lasso | {"change": "x"}, error="ValueError: boom")
    fix = coder.write(CoderRequest(operator=Operator.DEBUG, task=spec, profile=prof, parent=failed, lineage=(a,), seed=6, tried={config_key(lasso): 1}))
    assert config_key(fix.config) != config_key(lasso) and "node 1's" in fix.plan


def test_interpretable_constraint_drafts_only_inspectable_models_and_no_ensemble(tmp_path):
    import yaml

    from mcgs.search import create_search
    from mcgs.settings import SearchSettings
    from mcgs.task import load_task

    folder = tmp_path / "t"
    make_task(folder, "binary")
    cfg = yaml.safe_load((folder / "task.yaml").read_text())
    cfg["constraints"] = {"interpretable": True}
    (folder / "task.yaml").write_text(yaml.safe_dump(cfg))
    spec = load_task(folder)
    prof = profile_task(spec)
    coder = RecipeCoder()
    drafts = []
    for k in range(4):
        ans = coder.write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=prof, siblings=tuple(drafts), seed=k))
        drafts.append(FrozenNode(id=k + 1, seq=k + 1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.8, config=ans.config))
    models = {d.config["model"] for d in drafts}
    assert models <= {"model.logistic_regression", "model.ridge", "model.knn", "model.tfidf_linear"} and len(models) >= 2
    search = create_search(spec, tmp_path / "run", settings=SearchSettings(max_nodes=1))
    assert search.settings.ensemble is False


@pytest.mark.parametrize("kind", ["binary", "multiclass"])
def test_text_recipes_run_and_read_the_text(tmp_path, kind):
    import yaml

    rng = np.random.default_rng(1)
    vocab = {"a": "ship sea storm sail wave", "b": "ghost grave night fear dark", "c": "love heart rose kiss dear"}
    labels = rng.choice(list(vocab) if kind == "multiclass" else ["a", "b"], 400)
    noise = "the of and to in was it".split()
    text = [" ".join(rng.choice(vocab[lab].split() + noise * 2, 12)) for lab in labels]
    # and an integer key (a user id): the target-encoding block applies, also to naive Bayes, whose matrix holds only the text
    df = __import__("pandas").DataFrame({"id": range(400), "user": rng.integers(0, 150, 400) * 7 + 1000, "text": text, "author": labels})
    folder = tmp_path / "t"
    folder.mkdir()
    df.iloc[:300].to_csv(folder / "train.csv", index=False)
    df.iloc[300:, :3].to_csv(folder / "test.csv", index=False)
    df.iloc[300:, :1].assign(author="a").to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "accuracy", "validation": {"n_splits": 3}}))
    from mcgs.task import load_task

    spec = load_task(folder)
    prof = profile_task(spec)
    assert prof["n_text"] == 1 and prof["key_columns"] == ["user"]
    models = [e.id for e in retrieve(prof, recipe_kind="model")]
    assert models[:2] == ["model.naive_bayes_text", "model.tfidf_linear"]  # text models are drafted first
    for model in models[:2]:
        config = RecipeCoder().default_config(model, prof)
        assert config["features"]["target_encoding"]
        ev, out, ids = run_recipe(spec, config, tmp_path / model)
        assert ev.score > 0.9, (model, ev.score)  # the words give the label away; only reading them scores
        assert "data.text_statistics" in ids


def test_histogram_boosting_runs_when_a_class_has_a_single_row_in_a_training_fold(tmp_path):
    """scikit-learn's early stopping draws its rows stratified, which needs two rows of every
    class: a class seen once in a training fold (a rare class, or any small subsample of a task
    with one, as screening's 500 rows of bird_strike_phase) must not make the program fail."""
    import yaml

    spec = make_task(tmp_path / "t", "multiclass", metric="accuracy")
    train = pd.read_csv(spec.data_dir / "train.csv")
    train.loc[5, "target"] = "rare"  # one row: in the training part of two of the three folds
    train.to_csv(spec.data_dir / "train.csv", index=False)
    (spec.data_dir / "task.yaml").write_text(yaml.safe_dump({"metric": "accuracy", "target": "target", "validation": {"kind": "kfold", "n_splits": 3}}))
    spec = load_task(spec.data_dir)
    config = RecipeCoder().default_config("model.hist_gradient_boosting", profile_task(spec))
    ev, out, _ = run_recipe(spec, config, tmp_path / "run")
    assert ev.score > 0.5


def test_lags_of_rows_sent_for_prediction_are_taken_from_the_runs_rows(tmp_path):
    """A time-indexed task: lags and rolling means of the covariates are computed along time over
    train + test; three test rows predicted alone get the lags (and predictions) they had."""
    import yaml

    from mcgs.task import load_task

    folder = tmp_path / "t"
    folder.mkdir()
    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"rid": range(n), "datetime": pd.date_range("2021-01-01", periods=n, freq="h").astype(str),
                       "temp": rng.normal(20, 5, n).round(1), "hum": rng.integers(20, 90, n), "season": rng.choice(["a", "b"], n)})
    df["count"] = (df.temp * 3 + rng.normal(0, 5, n)).clip(0)
    train, test = df.iloc[:500], df.iloc[500:].drop(columns="count")
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"rid": test.rid, "count": 0}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "rmsle", "target": "count", "id_column": "rid",
                                                      "validation": {"kind": "time_split", "time_column": "datetime", "n_splits": 3}}))
    spec = load_task(folder)
    config = RecipeCoder().default_config("model.lightgbm", profile_task(spec))
    config["features"] = {f: True for f in FEATURE_ORDER}
    config["params"]["n_estimators"] = 40
    _, _, ids = run_recipe(spec, config, tmp_path / "run")
    assert "data.covariate_lags" in ids
    rows = [3, 50, 99]
    got, expected = _predicted_alone_and_in_the_run(tmp_path / "run" / "ws", test, rows)
    got, expected = got["count"].to_numpy(), expected["count"].to_numpy()
    assert np.abs(got - expected).max() <= 1e-6


_RECORD_FITS = '''
import json, os
import lightgbm, catboost

def _record(name, orig):
    def fit(self, X, y, *args, **kwargs):
        stop = kwargs.get("eval_set")
        stop = stop[0][0] if isinstance(stop, list) else (stop[0] if stop is not None else None)
        params = self.get_params()
        rounds = params.get("n_estimators") or params.get("iterations")
        out = orig(self, X, y, *args, **kwargs)
        best = self.best_iteration_ if name == "lightgbm" else (self.get_best_iteration() or 0) + 1
        with open(os.environ["FIT_LOG"], "a") as fh:
            fh.write(json.dumps({"model": name, "fit": [int(i) for i in X.index], "rounds": rounds, "best": best,
                                 "stop": None if stop is None else [int(i) for i in stop.index]}) + "\\n")
        return out
    return fit

lightgbm.LGBMModel.fit = _record("lightgbm", lightgbm.LGBMModel.fit)
for cls in (catboost.CatBoostClassifier, catboost.CatBoostRegressor):
    cls.fit = _record("catboost", cls.fit)
'''


@pytest.mark.parametrize("model", ["model.lightgbm", "model.catboost"])
def test_boosting_stops_early_on_rows_of_the_training_fold_never_on_its_validation_rows(tmp_path, model):
    """Knowledge entry strategy.early_stopping: each fold's stopping rows are a tenth of that
    fold's training rows, per class, disjoint from the rows it is fitted on; the fold's
    validation (OOF) rows are in neither. The model is then boosted again on all the fold's
    training rows, for the stopped round count scaled by the extra rows. A time split does not
    stop early."""
    import json

    from mcgs.coders.recipe_config import default_config, render_program
    from mcgs.contract import prepare_run_input, prepare_workspace

    spec = make_task(tmp_path / "t", "binary", n=900)
    prof = profile_task(spec)
    config = default_config(model, prof) | {"seed": 0}
    config["params"] = {**config["params"], **({"n_estimators": 300} if model == "model.lightgbm" else {"iterations": 300})}
    code, ids = render_program(config, title="t", plan="t", profile=prof)
    assert "strategy.early_stopping" in ids
    inp = prepare_run_input(spec, tmp_path / "run")
    ws = prepare_workspace(inp, tmp_path / "ws", code)
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(_RECORD_FITS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "hook"), "FIT_LOG": str(tmp_path / "fits.jsonl")}
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    folds = pd.read_csv(inp / "folds.csv")["fold"].to_numpy()
    fits = [json.loads(line) for line in (tmp_path / "fits.jsonl").read_text().splitlines()]
    assert len(fits) == 2 * len(set(folds[folds >= 0]))  # per fold: stopped, then refit on the whole fold
    y = (pd.read_csv(spec.train_path)["target"].astype(str) == "True").to_numpy()
    for k, fit, refit in zip(sorted(set(folds[folds >= 0])), fits[0::2], fits[1::2]):
        fit_rows, stop_rows = set(fit["fit"]), set(fit["stop"])
        training = set(np.flatnonzero(folds != k))
        assert fit_rows | stop_rows == training and not fit_rows & stop_rows
        for label in (True, False):  # a tenth of each class
            n_class = sum(y[i] == label for i in training)
            assert sum(y[i] == label for i in stop_rows) == int(n_class * 0.1)
        assert set(refit["fit"]) == training and refit["stop"] is None
        assert fit["rounds"] == 300 and refit["rounds"] == max(1, round(fit["best"] / 0.9))
    # under a time split the rows are not split: a random hold-out would look into the future
    frame = pd.read_csv(spec.train_path)
    frame["day"] = pd.date_range("2020-01-01", periods=len(frame), freq="D").astype(str)
    frame.to_csv(spec.train_path, index=False)
    test = pd.read_csv(spec.test_path)
    test["day"] = pd.date_range("2030-01-01", periods=len(test), freq="D").astype(str)
    test.to_csv(spec.test_path, index=False)
    with open(spec.data_dir / "task.yaml", "a") as fh:
        fh.write("validation: {kind: time_split, time_column: day, n_splits: 3}\n")
    timed = load_task(spec.data_dir)
    code, _ = render_program(config, title="t", plan="t", profile=profile_task(timed))
    inp = prepare_run_input(timed, tmp_path / "run2")
    ws = prepare_workspace(inp, tmp_path / "ws2", code)
    (tmp_path / "fits.jsonl").unlink()
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(json.loads(line)["stop"] is None for line in (tmp_path / "fits.jsonl").read_text().splitlines())


def test_tree_models_read_the_words_of_a_text_column_through_the_text_content_block(tmp_path):
    """A table whose label is said in a free-text remark (as a bird-strike report names the
    phase of flight): LightGBM reads it through the word indicators and SVD components of
    ``data.text_content`` (on by default where there is text) and scores far above the same
    program without them; three test rows predicted alone get the predictions they had in the
    full test table (vocabulary and components come from the run's rows, not the rows sent)."""
    import yaml

    from mcgs.coders.recipe_config import READS_TEXT

    rng = np.random.default_rng(2)
    n = 600
    phases = rng.choice(["climb", "approach", "landing"], n)
    filler = "bird struck aircraft no damage reported time local crew engine wing".split()
    remark = [" ".join(list(rng.choice(filler, 7)) + ([f"on {p}"] if rng.random() < 0.85 else [])) for p in phases]
    df = pd.DataFrame({"id": range(n), "remark": remark, "height": rng.normal(500, 200, n).round(), "phase": phases})
    folder = tmp_path / "t"
    folder.mkdir()
    df.iloc[:450].to_csv(folder / "train.csv", index=False)
    test = df.iloc[450:].drop(columns="phase")
    test.to_csv(folder / "test.csv", index=False)
    test[["id"]].assign(phase="climb").to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "accuracy", "target": "phase", "validation": {"n_splits": 3}}))
    spec = load_task(folder)
    prof = profile_task(spec)
    coder = RecipeCoder()
    assert all(not coder.default_config(m, prof)["features"]["text_content"] for m in READS_TEXT)  # they read the n-grams themselves
    config = coder.default_config("model.lightgbm", prof)
    assert config["features"]["text_content"]
    config["params"]["n_estimators"] = 60
    scores, _ = _scores_off_and_on(spec, config, "text_content", "data.text_content", tmp_path / "lgbm")
    assert scores[True] > 0.8 and scores[False] < 0.5, scores
    got, expected = _predicted_alone_and_in_the_run(tmp_path / "lgbm-True" / "ws", test, [0, 4, 9])
    got, expected = got.drop(columns="row", errors="ignore").to_numpy(), expected.drop(columns="row").to_numpy()
    assert np.abs(got - expected).max() <= 1e-6


def _scores_off_and_on(spec, config: dict, flag: str, entry_id: str, folder) -> tuple[dict[bool, float], str]:
    """Run ``config`` with the feature block ``flag`` off (in ``{folder}-False``) and on
    (``{folder}-True``); the program cites ``entry_id`` only when it is on. Returns the CV score
    per setting and the program's output with it on."""
    scores = {}
    for on in (False, True):
        config["features"][flag] = on
        ev, out, ids = run_recipe(spec, config, folder.parent / f"{folder.name}-{on}")
        assert (entry_id in ids) == on
        scores[on] = ev.score
    return scores, out


def _predicted_alone_and_in_the_run(ws, test: pd.DataFrame, rows: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Predict ``test``'s ``rows`` alone with the fitted program in ``ws`` (predict mode); returns
    those predictions (prediction-column layout) and the rows' predictions in the run's
    ``working/test_pred.csv``."""
    test.iloc[rows].to_csv(ws / "few.csv", index=False)
    env = {**os.environ, "MCGS_MODE": "predict", "MCGS_MODEL_FILE": "working/model.joblib",
           "MCGS_PREDICT_INPUT": "few.csv", "MCGS_PREDICT_OUTPUT": "few_out.csv"}
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return pd.read_csv(ws / "few_out.csv.raw.csv"), pd.read_csv(ws / "working" / "test_pred.csv").iloc[rows]


def _ratings_task(folder, rng: np.random.Generator, n: int, signal: bool, kind: str = "regression"):
    """A rating table: integer user and item keys (read as numbers), a timestamp with unique
    values and a continuous column; the rating is a user bias plus an item bias plus noise
    (``signal``) or noise alone."""
    import yaml

    users, items = rng.normal(0, 1.0, 120), rng.normal(0, 0.7, 300)
    u, i = rng.integers(0, 120, n), rng.integers(0, 300, n)
    noise = rng.normal(0, 0.5, n)
    rating = 3 + (users[u] + items[i] if signal else 0) + noise
    df = pd.DataFrame({"id": range(n), "user": u + 1000, "item": i * 7, "stamp": 10**9 + rng.permutation(n) * 37,
                       "temperature": rng.normal(20, 5, n).round(3), "rating": rating})
    if kind == "multiclass":
        df["rating"] = pd.cut(df["rating"], [-np.inf, 2.5, 3.5, np.inf], labels=["low", "mid", "high"]).astype(str)
    folder.mkdir(parents=True)
    cut = int(n * 0.8)
    df.iloc[:cut].to_csv(folder / "train.csv", index=False)
    test = df.iloc[cut:].drop(columns="rating")
    test.to_csv(folder / "test.csv", index=False)
    sample = test[["id"]].assign(rating=3.0) if kind == "regression" else test[["id"]].assign(high=1 / 3, low=1 / 3, mid=1 / 3)
    sample.to_csv(folder / "sample_submission.csv", index=False)
    metric = "rmse" if kind == "regression" else "log_loss"
    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": metric, "target": "rating", "validation": {"n_splits": 4}}))
    return load_task(folder), test


@pytest.mark.parametrize("kind", ["regression", "multiclass"])
def test_target_encoding_gives_integer_keys_their_level_means_from_the_training_fold_only(tmp_path, kind):
    """Knowledge entry data.target_encoding_in_folds: on a rating table whose label is a user
    bias plus an item bias, the block encodes the two integer keys (not the unique timestamp or
    the continuous column: the profile's key columns) and LightGBM's CV score improves clearly; on a label that is noise it
    scores no better than the mean (an encoding that saw the validation rows' labels would);
    test rows predicted alone get the predictions they had in the run."""
    from mcgs.coders.recipe_config import default_config

    rng = np.random.default_rng(5)
    spec, test = _ratings_task(tmp_path / "t", rng, 2500, signal=True, kind=kind)
    prof = profile_task(spec)
    assert prof["key_columns"] == ["user", "item"]
    config = default_config("model.lightgbm", prof)
    assert config["features"]["target_encoding"]  # on by default where there is a key column
    config["params"].update(n_estimators=200, learning_rate=0.09)  # a third of the default's rounds at three times its rate: the same fit, a third of the time
    scores, out = _scores_off_and_on(spec, config, "target_encoding", "data.target_encoding_in_folds", tmp_path / "te")
    assert "target encoding of ['user', 'item']" in out
    assert scores[True] < 0.93 * scores[False], scores  # rmse or log loss: lower is better
    got, expected = _predicted_alone_and_in_the_run(tmp_path / "te-True" / "ws", test, [1, 6, 40])
    got, expected = got.drop(columns="row", errors="ignore").to_numpy(), expected.drop(columns="row").to_numpy()
    assert np.abs(got - expected).max() <= 1e-6
    if kind == "regression":
        noise, _ = _ratings_task(tmp_path / "noise", np.random.default_rng(6), 2500, signal=False)
        ev, out, _ = run_recipe(noise, config, tmp_path / "te-noise")
        y = pd.read_csv(noise.train_path)["rating"]
        assert "target encoding of ['user', 'item']" in out and ev.score >= 0.98 * y.std(), (ev.score, y.std())
