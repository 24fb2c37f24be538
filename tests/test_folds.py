"""Folds sized to the data: 5 folds on small tables, 3 from 50 000 rows, a holdout from 200 000
(when task.yaml does not say); and a holdout run, whose OOF rows are one fold, still scores,
ensembles and stacks its nodes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mcgs.task as task_module
from mcgs.coders.recipe import RecipeCoder
from mcgs.contract import make_folds
from mcgs.ensemble import second_level_folds
from mcgs.node import NodeState, Operator
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from mcgs.task import default_n_splits, load_task

from test_task import write_task


def _table(folder, n, kind="binary", validation=None):
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    target = np.where(x + rng.normal(0, 0.5, n) > 0, "yes", "no") if kind == "binary" else 3 * x + rng.normal(0, 0.3, n)
    folder.mkdir(parents=True)
    pd.DataFrame({"id": np.arange(n), "x": x, "y": target}).to_csv(folder / "train.csv", index=False)
    pd.DataFrame({"id": np.arange(n, n + 50), "x": rng.normal(size=50)}).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"id": np.arange(n, n + 50), "y": 0.5}).to_csv(folder / "sample_submission.csv", index=False)
    task = {"metric": "roc_auc" if kind == "binary" else "rmse", "target": "y"} | ({"validation": validation} if validation else {})
    import yaml

    (folder / "task.yaml").write_text(yaml.safe_dump(task))
    return load_task(folder)


def test_folds_follow_the_training_rows_unless_the_task_says(tmp_path):
    assert [default_n_splits(n) for n in (100, 49_999, 50_000, 10**6)] == [5, 5, 3, 3]
    small = _table(tmp_path / "small", 1_000)
    assert (small.validation.kind, small.validation.n_splits) == ("stratified_kfold", 5)
    mid = _table(tmp_path / "mid", 60_000, kind="regression")
    assert (mid.validation.kind, mid.validation.n_splits) == ("kfold", 3)
    big = _table(tmp_path / "big", 210_000)
    assert (big.validation.kind, big.validation.n_splits) == ("holdout", 5)
    folds = make_folds(big, pd.read_csv(big.train_path))["fold"].to_numpy()
    assert set(folds) == {-1, 0} and abs((folds == 0).mean() - 0.2) < 0.001  # a fifth is validated, the rest only trains
    y = pd.read_csv(big.train_path)["y"].to_numpy()
    assert abs((y[folds == 0] == "yes").mean() - (y == "yes").mean()) < 0.002  # stratified
    told = _table(tmp_path / "told", 60_000, validation={"n_splits": 5})
    assert (told.validation.kind, told.validation.n_splits) == ("stratified_kfold", 5)
    kfold_big = _table(tmp_path / "kfold_big", 210_000, validation={"kind": "stratified_kfold"})
    assert (kfold_big.validation.kind, kfold_big.validation.n_splits) == ("stratified_kfold", 3)
    holdout_small = _table(tmp_path / "holdout_small", 1_000, validation={"kind": "holdout", "n_splits": 4})
    folds = make_folds(holdout_small, pd.read_csv(holdout_small.train_path))["fold"].to_numpy()
    assert (folds == 0).sum() == 250 and (folds == -1).sum() == 750


def test_a_holdout_run_scores_ensembles_and_stacks_on_its_one_validated_fold(tmp_path, monkeypatch):
    """Ensemble selection's nested score and stacking cross-fit over five interleaved parts of
    the holdout; the final choice compares nodes on the holdout rows."""
    assert second_level_folds(np.array([0, 0, 0, 0, 0, 0, 0])).tolist() == [0, 1, 2, 3, 4, 0, 1]
    assert second_level_folds(np.array([1, 0, 2, 1])).tolist() == [1, 0, 2, 1]
    monkeypatch.setattr(task_module, "HOLDOUT_ROWS", 300)
    folder = write_task(tmp_path / "task", task={"metric": "roc_auc"}, n=600)
    # a label the models can learn (write_task's carries no signal), each model to its own degree
    train = pd.read_csv(folder / "train.csv")
    rng = np.random.default_rng(0)
    train["x"] = rng.normal(size=len(train))
    train["x2"] = rng.normal(size=len(train))
    signal = train["x"] + np.sin(3 * train["x2"]) + rng.normal(scale=0.8, size=len(train))
    train["label"] = np.where(signal > 0, "yes", "no")
    train.to_csv(folder / "train.csv", index=False)
    test = pd.read_csv(folder / "test.csv")
    test["x2"] = rng.normal(size=len(test))
    test.to_csv(folder / "test.csv", index=False)
    spec = load_task(folder)
    assert (spec.validation.kind, spec.validation.n_splits) == ("holdout", 5)
    settings = SearchSettings(time_budget_s=600, max_nodes=4, num_drafts=3, plan_candidates=0, ensemble_method="stacking",
                              ensemble_every=2, seed=0)
    search = create_search(folder, tmp_path / "run", settings=settings,
                           coder=RecipeCoder(models=("model.logistic_regression", "model.random_forest", "model.lightgbm")))
    final = search.run()
    nodes = search.nodes()
    drafts = [n for n in nodes if n.operator is Operator.DRAFT]
    assert all(n.state is NodeState.VALID for n in drafts), [n.error for n in drafts]
    ensembles = [n for n in nodes if n.operator is Operator.ENSEMBLE]
    assert ensembles and all(n.state is NodeState.VALID for n in ensembles), [n.error for n in ensembles]
    assert any("stacking" in (n.plan or "").lower() for n in ensembles), [n.plan for n in ensembles]
    assert final is not None and (search.run_dir / "best" / "submission.csv").is_file()
    oof = pd.read_csv(search.node_dir(drafts[0]) / "working" / "oof.csv")
    assert len(oof) == 120  # only the holdout's rows have OOF predictions


@pytest.mark.parametrize("kind", ["group_kfold", "time_split"])
def test_schemes_that_fix_their_own_folds_keep_five_by_default(tmp_path, kind):
    n = 60_000
    rng = np.random.default_rng(0)
    folder = tmp_path / kind
    folder.mkdir()
    train = pd.DataFrame({"id": np.arange(n), "g": rng.integers(0, 100, n), "t": pd.date_range("2000-01-01", periods=n, freq="h").astype(str),
                          "y": rng.normal(size=n)})
    train.to_csv(folder / "train.csv", index=False)
    test = train.head(20).assign(id=np.arange(n, n + 20)).drop(columns="y")
    test.to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], "y": 0.0}).to_csv(folder / "sample_submission.csv", index=False)
    extra = {"group_column": "g"} if kind == "group_kfold" else {"time_column": "t"}
    import yaml

    (folder / "task.yaml").write_text(yaml.safe_dump({"metric": "rmse", "target": "y", "validation": {"kind": kind, **extra}}))
    assert load_task(folder).validation.n_splits == 5
