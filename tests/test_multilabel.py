"""Multi-label tabular tasks: several 0/1 label columns, one probability each, scored by the
mean column-wise ROC AUC; recipes fit one binary model per label and ensembles combine them."""

from __future__ import annotations

import pytest
import yaml

from mcgs.coders.recipe import RecipeCoder
from mcgs.node import NodeState, Operator
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from mcgs.task import TaskError, load_task
from recipe_runs import make_task


def test_multilabel_task_loads_and_a_search_ensembles_it(tmp_path):
    spec = make_task(tmp_path / "t", "multilabel")
    assert spec.task_kind == "multilabel" and spec.prediction_columns == ["l1", "l2"]
    assert spec.submission_format == "probability" and spec.validation.kind == "kfold"
    settings = SearchSettings(max_nodes=3, num_drafts=3, time_budget_s=600, seed=0, policy="tree")
    search = create_search(spec, tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression", "model.lightgbm", "model.knn")))
    final = search.run()
    drafts = [n for n in search.nodes() if n.operator is Operator.DRAFT]
    assert len(drafts) == 3 and all(n.state is NodeState.VALID for n in drafts)
    assert all(0.6 < n.score <= 1.0 for n in drafts)  # both labels are learnable from the columns
    assert final.operator is Operator.ENSEMBLE or final.score == max(n.score for n in drafts)
    import pandas as pd

    sub = pd.read_csv(tmp_path / "run" / "best" / "submission.csv")
    assert list(sub.columns) == ["key", "l1", "l2"] and sub[["l1", "l2"]].stack().between(0, 1).all()


def test_multilabel_needs_01_columns_and_a_probability_metric(tmp_path):
    make_task(tmp_path / "t", "multilabel")
    cfg = yaml.safe_load((tmp_path / "t" / "task.yaml").read_text())
    (tmp_path / "t" / "task.yaml").write_text(yaml.safe_dump(cfg | {"metric": "accuracy"}))
    with pytest.raises(TaskError, match="probability metric"):
        load_task(tmp_path / "t")
    make_task(tmp_path / "u", "multi_target_regression")
    cfg = yaml.safe_load((tmp_path / "u" / "task.yaml").read_text())
    (tmp_path / "u" / "task.yaml").write_text(yaml.safe_dump(cfg | {"metric": "mean_column_roc_auc"}))
    with pytest.raises(TaskError, match=r"multi-label \(one 0/1 column per label\)"):
        load_task(tmp_path / "u")


@pytest.mark.realdata
def test_steel_plate_defects_from_a_request(shared_data, tmp_path):
    from mcgs.request import task_from_request

    spec, _ = task_from_request(
        "Predict the seven defect labels; judged by the average AUC of the labels.",
        shared_data / "playground-series-s4e3" / "raw", tmp_path / "task",
    )
    assert spec.task_kind == "multilabel" and len(spec.target_columns) == 7
    from mcgs.screening import build_screen_task

    spec = build_screen_task(spec, tmp_path / "rows", max_rows=4000, seed=0)  # 4000 of 19219 rows: keeps the test short
    settings = SearchSettings(max_nodes=1, time_budget_s=600, seed=0, ensemble=False, policy="tree")
    search = create_search(spec, tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression",)))
    node = search.run()
    assert node.state is NodeState.VALID and node.score > 0.84, node.score
    print("steel plates, logistic regression, 4000 rows: mean column AUC", node.score)
