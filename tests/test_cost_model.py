"""The cost model: its prior follows the work a recipe program does, and its calibration learns
the machine's and each family's scale from the run's finished nodes."""

from __future__ import annotations

import math

import pytest

from mcgs.cost_model import CostModel, fold_work, prediction_error, speed_note

LGBM = {"model": "model.lightgbm", "params": {"n_estimators": 600}}


def _profile(rows, features=20, kind="binary", classes=2, text=0):
    return {"n_train": rows, "n_features": features, "task_kind": kind, "n_classes": classes, "n_text": text}


def test_the_prior_grows_with_the_work_of_the_program():
    small, large = CostModel(_profile(5_000)), CostModel(_profile(50_000))
    assert large.prior_s(LGBM) - 2.0 == pytest.approx(10 * (small.prior_s(LGBM) - 2.0))  # linear in rows for trees
    knn = {"model": "model.knn", "params": {}}
    assert large.prior_s(knn) - 2.0 == pytest.approx(10 ** 1.5 * (small.prior_s(knn) - 2.0))  # brute-force search
    more_rounds = {"model": "model.lightgbm", "params": {"n_estimators": 1200}}
    assert small.prior_s(more_rounds) - 2.0 == pytest.approx(2 * (small.prior_s(LGBM) - 2.0))
    multi = CostModel(_profile(5_000, kind="multiclass", classes=7))
    assert multi.prior_s(LGBM) - 2.0 == pytest.approx(7 * (small.prior_s(LGBM) - 2.0))  # a tree per class per round
    assert multi.prior_s({"model": "model.logistic_regression", "params": {}}) == small.prior_s({"model": "model.logistic_regression", "params": {}})
    assert CostModel(_profile(5_000), folds=fold_work("holdout", 5)).prior_s(LGBM) < small.prior_s(LGBM)
    assert (fold_work("kfold", 5), fold_work("holdout", 5), fold_work("time_split", 4)) == (4.0, 0.8, 2.0)
    assert large.prior_s(LGBM, fidelity=1 / 10) == pytest.approx(small.prior_s(LGBM))  # a tenth of the rows, the same folds
    # the text_content block adds its word and component columns per text column (none without text)
    with_words = {**LGBM, "features": {"text_content": True}}
    text = CostModel(_profile(5_000, text=1))
    assert text.prior_s(with_words) - 2.0 == pytest.approx(((20 + 232) / 20) ** 0.5 * (text.prior_s(LGBM) - 2.0))
    assert small.prior_s(with_words) == small.prior_s(LGBM)


def test_a_graph_network_with_a_sparse_first_layer_costs_its_non_zero_cells_not_every_cell():
    """APPNP multiplies every feature cell; GRAND only the non-zero ones, plus its propagation per
    node: on a bag-of-words graph three times as wide (and sparser) APPNP's prior triples and
    GRAND's grows far less, as their programs' times did on Cora and CiteSeer (APPNP 24 -> 70 s,
    GRAND 42 -> 52-60 s)."""
    def graph(nodes, features, density):
        return {**_profile(140, features=features, kind="multiclass", classes=7), "modality": "graph",
                "graph": {"nodes": nodes, "edges": 2 * nodes, "feature_density": density}}

    cora, citeseer = CostModel(graph(2708, 1433, 0.0127), folds=1.0), CostModel(graph(3327, 3703, 0.0086), folds=1.0)  # one predefined split
    appnp, grand = {"model": "model.appnp", "params": {"epochs": 300}}, {"model": "model.grand", "params": {"epochs": 600}}
    assert (citeseer.prior_s(appnp) - 2.0) / (cora.prior_s(appnp) - 2.0) == pytest.approx(3327 * 3703 / (2708 * 1433))
    ratio = (citeseer.prior_s(grand) - 2.0) / (cora.prior_s(grand) - 2.0)
    assert 1.3 < ratio < 1.6
    assert 35 < cora.prior_s(grand) < 50 and citeseer.prior_s(grand) < citeseer.prior_s(appnp)
    # without a density (a profile from before it was measured) every cell counts
    old = CostModel(graph(2708, 1433, None), folds=1.0)
    assert old.prior_s(grand) - 2.0 == pytest.approx(215 * 2708 * 1433 / 1e6)


def test_calibration_learns_the_machine_and_each_family_from_finished_nodes():
    model = CostModel(_profile(20_000))
    prior = model.prior_s(LGBM)
    assert model.predict_s(LGBM) == prior  # nothing observed: the prior
    for _ in range(5):  # this machine runs LightGBM 3x slower than the prior says
        model.observe(LGBM, 3 * prior)
    assert model.predict_s(LGBM) == pytest.approx(3 * prior, rel=0.25)
    rf = {"model": "model.random_forest", "params": {}}
    assert 1.5 * model.prior_s(rf) < model.predict_s(rf) < 3 * model.prior_s(rf)  # the machine's scale carries over, shrunk
    model.observe({"model": "model.knn"}, 0.0)  # nothing to learn from a zero run time
    assert model.calibration("model.knn") == model.calibration("model.ridge")


def test_a_machine_that_got_slower_is_seen_as_slower_within_a_few_nodes_not_as_slow_models():
    """Twenty LightGBM and random-forest nodes at the prior's pace, then another job takes the
    machine and every program runs 3x slower: after eight slow nodes the predictions of both
    families are about 3x (the calibration over the whole run said 1.2x for LightGBM), and the two
    families keep their places relative to each other."""
    model = CostModel(_profile(20_000))
    rf = {"model": "model.random_forest", "params": {}}
    for i in range(20):
        model.observe(LGBM, model.prior_s(LGBM))
        model.observe(rf, 2 * model.prior_s(rf))  # random forest is 2x slower than its prior on this machine
    before_rf = model.predict_s(rf) / model.prior_s(rf)
    assert before_rf == pytest.approx(2.0, rel=0.25)
    for i in range(8):
        model.observe(LGBM if i % 2 else rf, 3 * (1 if i % 2 else 2) * model.prior_s(LGBM if i % 2 else rf))
    assert model.predict_s(LGBM) / model.prior_s(LGBM) == pytest.approx(3.0, rel=0.3)
    assert model.predict_s(rf) / model.prior_s(rf) == pytest.approx(6.0, rel=0.3)


def test_a_slowdown_is_told_once_when_it_comes_and_once_when_it_goes_and_a_dearer_family_is_not_one():
    """Ten nodes at the machine's pace, then four 2.5x slower: the note comes with the node that
    takes the slowdown over 1.5x, not before and not again; four nodes back at pace, and the
    recovery is told once. Moving to a family that is 4x dearer than its prior (random forest
    after LightGBM) is no slowdown."""
    model = CostModel(_profile(20_000))
    notes = []
    for factor in [1.0] * 10 + [2.5] * 4 + [1.0] * 4:
        model.observe(LGBM, factor * model.prior_s(LGBM))
        notes.append(speed_note(model))
    said = [(i, n) for i, n in enumerate(notes) if n]
    assert len(said) == 2 and 10 <= said[0][0] <= 13 and said[1][0] >= 14
    told = float(said[0][1].split("running ")[1].split("x slower")[0])
    assert 1.5 <= told <= 2.5 and "as fast as earlier" in said[1][1]
    assert model.slowdown() < 1.25
    mixed = CostModel(_profile(20_000))
    rf = {"model": "model.random_forest", "params": {}}
    for config, factor in [(LGBM, 1.0)] * 8 + [(rf, 4.0)] * 4:
        mixed.observe(config, factor * mixed.prior_s(config))
        assert speed_note(mixed) is None
    assert mixed.slowdown() == pytest.approx(1.0)
    # a slowdown that stays under 1.5x is never told, and neither is its end
    mild = CostModel(_profile(20_000))
    for factor in [1.0] * 10 + [1.35] * 4 + [1.0] * 4:
        mild.observe(LGBM, factor * mild.prior_s(LGBM))
        assert speed_note(mild) is None
    assert max(mild.slowdown(k) for k in range(1, mild.observed + 1)) >= 1.25


def test_the_error_is_the_median_absolute_log_ratio():
    assert prediction_error([(2.0, 1.0), (1.0, 1.0), (1.0, 4.0)]) == pytest.approx(math.log(2))
    assert prediction_error([]) is None


def test_a_recipe_candidate_gets_a_limit_from_its_predicted_run_time_and_is_told_so(tmp_path, monkeypatch):
    """On the demo task the cost model predicts a LightGBM program at a few seconds once the run
    has observed its drafts; a program that claims that config but hangs is stopped at
    ``timeout_factor`` x the prediction, not at the run's 300 s limit, and its error says why."""
    import mcgs.cost_model as cost_model
    from mcgs.demo import build_demo_task
    from mcgs.execution import execute
    from mcgs.node import NodeState, Operator
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    settings = SearchSettings(max_nodes=3, time_budget_s=1200, per_run_timeout_s=300, plan_candidates=0, timeout_factor=2.0,
                              recipe_models=["model.lightgbm", "model.logistic_regression"])
    search = create_search(build_demo_task(tmp_path / "task"), tmp_path / "run", settings=settings)
    search.run()  # the drafts, under the floor of MIN_PREDICTED_LIMIT_S
    done = [n for n in search.nodes() if n.is_valid and n.config.get("model") == "model.lightgbm"]
    assert done
    monkeypatch.setattr(cost_model, "MIN_PREDICTED_LIMIT_S", 2.0)  # so the hanging program below waits seconds, not 30
    config = dict(done[0].config)
    limit, predicted = cost_model.candidate_limit(search, done[0], 300.0)
    assert predicted == pytest.approx(done[0].runtime_s, rel=1.5) and limit == max(2.0, 2 * predicted) < 300
    root = search.nodes()[0]
    hang = search.storage.add_node(search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="hangs", config=config,
                                   code="import time\ntime.sleep(120)\n", owner=search.owner)
    finished = execute(search, hang, search.budget.node_timeout(), 0)
    assert finished.state is NodeState.TIMEOUT and finished.runtime_s < limit + 5
    assert "the cost model predicted" in finished.error
    # an LLM's program (no recipe config) keeps the run's fixed limit
    assert cost_model.candidate_limit(search, root, 300.0) == (300.0, None)


@pytest.mark.slow
def test_a_finished_run_replays_node_by_node_and_the_report_reads_the_kept_rows_as_it_reads_the_run(tmp_path):
    """``replay_run`` predicts each recipe node from the nodes before it: the first node of a
    family is predicted by its prior alone, and every row's actual is the node's stored run time.
    ``experiments/cost_model.py`` gives the same table from the rows kept as JSON (what
    ``mcgs bench`` keeps) as from the run folder."""
    import json
    import sys
    from pathlib import Path

    from mcgs.cost_model import replay_run
    from mcgs.demo import build_demo_task
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    settings = SearchSettings(max_nodes=4, time_budget_s=1200, plan_candidates=0,
                              recipe_models=["model.logistic_regression", "model.random_forest"])
    search = create_search(build_demo_task(tmp_path / "task"), tmp_path / "run", settings=settings)
    search.run()
    timed = {n.id: n.runtime_s for n in search.nodes() if n.config.get("model") and n.runtime_s}
    rows = replay_run(tmp_path / "run")
    assert len(rows) == len(timed) >= 2
    assert sorted(r["actual"] for r in rows) == sorted(timed.values())
    firsts = {}
    for r in rows:
        firsts.setdefault(r["model"], r)
        assert r["prior"] > 0 and r["predicted"] > 0 and r["fidelity"] is not None
    assert set(firsts) == {"model.logistic_regression", "model.random_forest"}

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    import cost_model as report

    kept = tmp_path / "rows.json"
    kept.write_text(json.dumps(rows))
    report.main([str(tmp_path / "run"), "--report", str(tmp_path / "from_run.md")])
    report.main([str(kept), "--report", str(tmp_path / "from_rows.md")])
    table = lambda p: [line for line in p.read_text().splitlines() if line.startswith("| model.")]  # noqa: E731
    assert table(tmp_path / "from_run.md") == table(tmp_path / "from_rows.md") and len(table(tmp_path / "from_run.md")) == 2


def test_a_family_not_seen_to_finish_gets_a_wider_limit_that_other_families_cannot_shrink():
    """Once LightGBM's nodes have finished far below its prior, the calibration lowers every
    prediction; a random forest's first node is still limited from the larger of its prior and
    its prediction, twice as wide, and gets the usual margin once one of its nodes has finished."""
    import datetime as dt
    from types import SimpleNamespace

    import mcgs.cost_model as cost_model
    from mcgs.task import ValidationScheme

    profile = _profile(20_000, features=16, kind="multiclass", classes=7, text=1)
    validation = ValidationScheme(kind="kfold", n_splits=5)
    lgbm = {"model": "model.lightgbm", "params": {"n_estimators": 600}, "features": {"text_content": True}}
    forest = {"model": "model.random_forest", "params": {}, "features": {"text_content": True}}
    start = dt.datetime(2026, 12, 4)

    def node(config, runtime, i):
        return SimpleNamespace(config=config, runtime_s=runtime, state=SimpleNamespace(value="valid"), fidelity=1.0,
                               finished_at=start + dt.timedelta(seconds=i))

    nodes = [node(lgbm, CostModel(profile, 4.0).prior_s(lgbm) / 7, i) for i in range(3)]
    search = SimpleNamespace(profile=profile, task=SimpleNamespace(validation=validation), settings=SimpleNamespace(timeout_factor=4.0),
                             nodes=lambda: nodes)
    first = SimpleNamespace(config=forest, fidelity=1.0)
    model = cost_model.run_cost_model(search)
    prior, predicted = model.prior_s(forest), model.predict_s(forest)
    assert predicted < prior / 2  # what LightGBM's overestimate taught the calibration
    limit, said = cost_model.candidate_limit(search, first, 10_000.0)
    assert said == pytest.approx(predicted) and limit == pytest.approx(4.0 * cost_model.UNSEEN_FAMILY_MARGIN * prior)
    nodes.append(node(forest, prior, 3))
    limit, said = cost_model.candidate_limit(search, first, 10_000.0)
    assert limit == pytest.approx(max(cost_model.MIN_PREDICTED_LIMIT_S, 4.0 * said))
    assert limit < 4.0 * cost_model.UNSEEN_FAMILY_MARGIN * prior
