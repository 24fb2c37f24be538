"""The MLflow callback (mcgs/integrations.py) with a local MLflow store: a search's nodes as
nested runs whose metrics are the stored scores."""

from __future__ import annotations

import pytest

from mcgs.node import Operator
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings
from recipe_runs import make_task


def test_a_five_node_search_logs_five_nested_runs_with_the_stored_scores(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)  # a local store keeps its artifacts in ./mlruns
    from mlflow.tracking import MlflowClient

    from mcgs.integrations import MLflowCallback

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = SearchSettings(time_budget_s=300, max_nodes=5, seed=0, policy="greedy", ensemble=False, plan_candidates=0, cpu_threads=1,
                              recipe_models=["model.logistic_regression", "model.random_forest"])
    search = create_search(make_task(tmp_path / "t", "binary"), tmp_path / "run", settings=settings, callbacks=[MLflowCallback(uri, experiment="test")])
    final = search.run()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("test")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and parents[0].data.tags["mcgs.chosen_node"] == str(final.seq)
    nodes = {n.seq: n for n in search.nodes() if n.parent_id is not None and n.operator is not Operator.ENSEMBLE}
    assert len(children) == len(nodes) == 5
    for r in children:
        node = nodes[int(r.data.tags["mcgs.node"])]
        assert r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id and r.data.tags["mcgs.operator"] == node.operator.value
        assert r.data.metrics.get("score") == pytest.approx(node.score) if node.is_valid else "score" not in r.data.metrics
        assert r.data.params["model"] == node.config["model"] and r.info.status == ("FINISHED" if node.is_valid else "FAILED")
        assert r.data.tags["mcgs.branch"] in {str(n.seq) for n in nodes.values() if n.operator is Operator.DRAFT}
    assert parents[0].data.metrics["best_score"] == pytest.approx(final.score)
    artifact = client.download_artifacts(children[0].info.run_id, "solution.py", str(tmp_path))
    assert open(artifact).read() == nodes[int(children[0].data.tags["mcgs.node"])].code
    # a resumed search finds its run and logs only the nodes it adds
    search = open_search(tmp_path / "run", callbacks=[MLflowCallback(uri, experiment="test")], time_budget_s=300)
    search.settings = search.settings.model_copy(update={"max_nodes": 6})
    search.run()
    runs = client.search_runs([exp.experiment_id], max_results=100)
    assert sum("mlflow.parentRunId" not in r.data.tags for r in runs) == 1 and len(runs) == 1 + 6


def test_a_tracker_that_fails_is_said_once_and_the_search_goes_on(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own retries of an unreachable server take minutes
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    from mcgs.integrations import MLflowCallback

    said = []
    settings = SearchSettings(time_budget_s=300, max_nodes=2, seed=0, policy="greedy", ensemble=False, plan_candidates=0, cpu_threads=1,
                              recipe_models=["model.logistic_regression"])
    search = create_search(make_task(tmp_path / "t", "binary"), tmp_path / "run", settings=settings,
                           callbacks=[MLflowCallback("http://127.0.0.1:9/", experiment="test")])
    search.say = said.append
    final = search.run()
    assert final is not None and final.is_valid
    assert sum("MLflow logging stopped" in s for s in said) == 1


def test_the_setting_adds_the_callback_so_a_resumed_run_keeps_logging(tmp_path):
    pytest.importorskip("mlflow")
    from mcgs.integrations import MLflowCallback
    from mcgs.search import _with_tracking

    plain = _with_tracking([], SearchSettings())
    tracked = _with_tracking([print], SearchSettings(mlflow_tracking_uri=f"sqlite:///{tmp_path / 'm.db'}", mlflow_experiment="e"))
    assert plain == [] and tracked[0] is print and isinstance(tracked[1], MLflowCallback) and tracked[1].experiment == "e"
