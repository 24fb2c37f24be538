"""The graph operators inside a real search on the demo task: Fusion and Aggregate nodes are
stored with their `fuses` edges, Evolve with `references`, ensembles during the search, and the
Code Review's rejections recorded on the node and handed to Debug."""

from __future__ import annotations

import dataclasses

import pytest

from mcgs.coders import CoderAnswer, CoderRequest, config_key
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.node import EdgeKind, NodeState, Operator
from mcgs.search import create_search
from mcgs.settings import SearchSettings

FAST = ("model.logistic_regression", "model.lightgbm", "model.knn")


@pytest.fixture(scope="module")
def demo_task(tmp_path_factory):
    return build_demo_task(tmp_path_factory.mktemp("demo") / "task")


@pytest.fixture(scope="module")
def graph_run(demo_task, tmp_path_factory):
    settings = SearchSettings(
        time_budget_s=900, per_run_timeout_s=120, num_drafts=3, max_nodes=10, seed=0, plan_candidates=0,
        branch_stagnation=1, global_stagnation=2, ensemble_every=6, policy="mcgs",
    )
    search = create_search(demo_task, tmp_path_factory.mktemp("graph") / "run", settings=settings, coder=RecipeCoder(models=FAST))
    search.run()
    return search


@pytest.mark.slow
def test_fusion_and_aggregate_nodes_have_two_fuses_edges_or_more(graph_run):
    nodes = {n.id: n for n in graph_run.nodes()}
    edges = graph_run.storage.get_edges(graph_run.run_id)
    ops = {n.operator for n in nodes.values()}
    assert Operator.FUSION in ops and Operator.AGGREGATE in ops, sorted(o.value for o in ops)
    for n in nodes.values():
        fuses = [e for e in edges if e.dst == n.id and e.kind is EdgeKind.FUSES]
        if n.operator in (Operator.FUSION, Operator.AGGREGATE):
            assert len(fuses) >= 2, (n.seq, n.operator)
            assert all(nodes[e.src].is_valid for e in fuses)
            assert n.state is NodeState.VALID, n.error
        else:
            assert not fuses
        if n.operator is Operator.AGGREGATE:
            assert nodes[n.parent_id].state is NodeState.ROOT  # a new root-level branch
        if n.operator is Operator.EVOLVE:
            assert any(e.dst == n.id and e.kind is EdgeKind.REFERENCES for e in edges)


def test_no_two_nodes_run_the_same_program(graph_run):
    """Stagnation sends Fusion and Aggregate back to the same branch bests; what they write must
    still be a program the graph does not have (up to its seed)."""
    keys = [config_key(n.config) for n in graph_run.nodes() if n.operator not in (Operator.ENSEMBLE,) and n.config]
    assert len(keys) >= 8 and len(set(keys)) == len(keys)


def test_ensembles_are_built_during_the_search_and_every_node_was_reviewed(graph_run):
    nodes = graph_run.nodes()
    ensembles = [n for n in nodes if n.operator is Operator.ENSEMBLE]
    assert len(ensembles) >= 2  # at least one during the search, plus the final one
    assert any("ensemble during the search" in n.plan for n in ensembles)
    assert all(n.state is NodeState.VALID for n in ensembles)
    assert all(n.review.get("verdict") == "passed" for n in nodes if n.code)


def test_ensembles_during_the_search_are_put_off_beyond_their_time_share(demo_task, tmp_path, caplog):
    """``ensemble_time_share`` caps the engine's time selecting ensembles during the search: at
    a share no selection fits in, only the first one (nothing spent yet) is built, every later
    due one is put off, and the final ensemble still comes."""
    settings = SearchSettings(
        time_budget_s=900, per_run_timeout_s=120, num_drafts=2, max_nodes=8, seed=0, plan_candidates=0,
        ensemble_every=2, ensemble_time_share=1e-9, policy="mcgs",
    )
    search = create_search(demo_task, tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression", "model.knn")))
    with caplog.at_level("INFO", logger="mcgs"):
        search.run()
    ensembles = [n for n in search.nodes() if n.operator is Operator.ENSEMBLE]
    during = [n for n in ensembles if "ensemble during the search" in n.plan]
    assert len(during) == 1 and any("final ensemble" in n.plan for n in ensembles)
    assert "ensemble during the search put off" in caplog.text
    assert search.ensemble_state.select_s > 0


class SocketInjector:
    """Adds a socket import to the first program only (as a careless LLM might)."""

    name = "socket-injector"

    def __init__(self):
        self.inner = RecipeCoder(models=("model.logistic_regression",))
        self.calls = 0

    def write(self, request: CoderRequest) -> CoderAnswer:
        self.calls += 1
        ans = self.inner.write(request)
        if self.calls == 1:
            ans = dataclasses.replace(ans, code="import socket\nsocket.create_connection(('example.com', 80))\n" + ans.code)
        return ans


def test_rejected_program_is_not_run_and_debug_gets_the_reasons(demo_task, tmp_path):
    settings = SearchSettings(time_budget_s=600, num_drafts=1, max_nodes=2, seed=0, ensemble=False, policy="tree")
    search = create_search(demo_task, tmp_path / "run", settings=settings, coder=SocketInjector())
    search.run()
    first, second = [n for n in search.nodes() if n.parent_id is not None][:2]
    assert first.state is NodeState.REJECTED and first.reward == -1.0
    assert first.review["verdict"] == "rejected" and "network" in first.error
    assert first.runtime_s == 0.0 and not (search.node_dir(first) / "working" / "oof.csv").exists()
    assert second.operator is Operator.DEBUG and second.parent_id == first.id
    assert second.state is NodeState.VALID
