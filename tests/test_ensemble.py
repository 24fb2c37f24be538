"""Engine-side ensembles: greedy forward selection recovers a known best blend, and a stacking
node runs inside a search like any node."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.ensemble import (
    FINAL_ENSEMBLE_TAG,
    blend_predictions,
    choose_final,
    greedy_selection,
    gross_error_rows,
    nested_ensemble_score,
    select_ensemble,
    selection_criterion,
)
from mcgs.evaluation import score_predictions
from mcgs.node import FrozenNode, NodeRole, NodeState, Operator
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from recipe_runs import make_task


def test_greedy_selection_recovers_the_best_blend_of_two_independent_models(tmp_path):
    spec = make_task(tmp_path / "t", "regression", metric="rmse")
    rng = np.random.default_rng(0)
    y = rng.normal(0, 1, 4000)
    # independent unbiased errors: the best blend weights each model by its inverse error
    # variance -> A and B 0.485 each, C (16 times the variance) 0.03
    a = y + rng.normal(0, 0.5, y.size)
    b = y + rng.normal(0, 0.5, y.size)
    c = y + rng.normal(0, 2.0, y.size)
    oofs = {1: a[:, None], 2: b[:, None], 3: c[:, None]}
    sel = greedy_selection(spec, y[:, None], oofs)
    total = sum(sel.weights.values())
    inv = {1: 1 / 0.25, 2: 1 / 0.25, 3: 1 / 4.0}
    optimum = {m: v / sum(inv.values()) for m, v in inv.items()}
    for m in oofs:
        assert abs(sel.weights.get(m, 0) / total - optimum[m]) <= 0.1, sel.weights
    blend = (a + b) / 2
    assert sel.criterion == "rmse"
    assert sel.criterion_value == pytest.approx(score_predictions(spec, y[:, None], blend[:, None]), rel=0.02)
    assert sel.criterion_value < 0.8 * min(score_predictions(spec, y[:, None], m) for m in oofs.values())


def test_greedy_selection_uses_log_loss_for_accuracy_tasks(tmp_path):
    spec = make_task(tmp_path / "t", "binary", metric="accuracy")
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 3000)
    logit = (2 * y - 1) * 1.0
    good = 1 / (1 + np.exp(-(logit + rng.normal(0, 1.5, y.size))))
    other = 1 / (1 + np.exp(-(logit + rng.normal(0, 1.5, y.size))))
    noise = rng.random(y.size)
    labels = np.where(y == 1, True, False)
    sel = greedy_selection(spec, labels, {1: good[:, None], 2: other[:, None], 3: noise[:, None]})
    assert sel.criterion == "log_loss"
    assert set(sel.weights) == {1, 2}


@pytest.mark.parametrize("kind, metric, criterion", [
    ("binary", "roc_auc", "roc_auc"), ("binary", "accuracy", "log_loss"), ("binary", "log_loss", "log_loss"),
    ("multiclass", "log_loss", "log_loss"), ("multiclass", "accuracy", "log_loss"), ("regression", "rmse", "rmse"),
    ("regression", "mae", "mae"), ("multi_target_regression", "rmsle", "rmsle"),
    ("multi_target_regression", "mean_column_rmsle", "mean_column_rmsle"), ("multiclass", "roc_auc", "roc_auc"),
])
def test_the_prepared_selection_criterion_equals_the_task_metric_computed_by_scikit_learn(tmp_path, kind, metric, criterion):
    """The criterion ensemble selection evaluates hundreds of times per ensemble is computed
    from its definition (ranks, clipped logs); it must give scikit-learn's value, ties and
    probabilities of exactly 0 and 1 included."""
    spec = make_task(tmp_path / "t", kind, metric=metric)
    rng = np.random.default_rng(3)
    n = 500
    if kind == "binary":
        y = rng.choice([True, False], n)
        pred = np.round(rng.random((n, 1)), 2)  # many ties
        pred[:5] = 0.0
        pred[5:10] = 1.0
    elif kind == "multiclass":
        y = rng.choice(["high", "low", "mid"], n)
        pred = rng.dirichlet([1, 1, 1], n)
        pred[:5] = [1.0, 0.0, 0.0]
    elif kind == "regression":
        y = rng.normal(10, 2, n)
        pred = (y + rng.normal(0, 1, n))[:, None]
    else:
        y = np.exp(rng.normal(1, 1, (n, 2)))
        pred = np.clip(y + rng.normal(0, 1, (n, 2)), -0.5, None)  # negative predictions are clipped, as by the metric
    name, score, higher = selection_criterion(spec, y)
    reference = spec.model_copy(update={"metric": criterion, "higher_is_better": criterion == "roc_auc"})
    assert (name, higher) == (criterion, criterion == "roc_auc")
    assert score(pred) == pytest.approx(score_predictions(reference, y, pred), rel=1e-9, abs=1e-12)


def test_the_cross_fitted_score_removes_the_optimism_of_selecting_on_the_same_rows(tmp_path):
    """Twelve members that are pure noise (three draws): selection on the OOF rows finds blends
    that look better than chance there; fitted on four folds and applied to the fifth they do
    not. With one informative member among them, the cross-fitted score stays close to it."""
    spec = make_task(tmp_path / "t", "binary", metric="roc_auc")
    n = 300
    folds = np.arange(n) % 5
    in_sample, nested = [], []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        labels = np.where(rng.integers(0, 2, n) == 1, True, False)
        noise = {i: rng.random((n, 1)) for i in range(12)}
        sel = select_ensemble(spec, labels, noise)
        chosen = list(sel.weights)
        blend = blend_predictions(spec, [noise[i] for i in chosen], [sel.weights[i] for i in chosen], sel.blend, sel.temperature)
        in_sample.append(score_predictions(spec, labels, blend))
        nested.append(nested_ensemble_score(spec, labels, noise, folds))
    assert np.mean(in_sample) > 0.56  # the selection fooled by its own rows
    assert abs(np.mean(nested) - 0.5) < 0.05 and np.mean(nested) < np.mean(in_sample) - 0.04
    y = labels.astype(float)
    good = 1 / (1 + np.exp(-(2 * y - 1) * 1.5 - rng.normal(0, 1, n)))
    honest = nested_ensemble_score(spec, labels, {**noise, 99: good[:, None]}, folds)
    assert honest == pytest.approx(score_predictions(spec, labels, good[:, None]), abs=0.03)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _three_classes(tmp_path, seed: int):
    """A 3-class log-loss task, a generator, 3 000 rows' true-class logits (4 on the true
    class) and their labels: what the calibration tests draw members from."""
    spec = make_task(tmp_path / "t", "multiclass", metric="log_loss")
    rng = np.random.default_rng(seed)
    n = 3000
    y = rng.integers(0, 3, n)
    return spec, rng, n, 4.0 * np.eye(3)[y], np.asarray(["high", "low", "mid"])[y]


def test_select_ensemble_sharpens_under_confident_members_and_drops_flat_ones(tmp_path):
    """Two regularised (under-confident) models of a 3-class problem plus a flat one: the
    arithmetic blend cannot undo the shrinkage; temperature scaling on the blend can."""
    spec, rng, n, logits, labels = _three_classes(tmp_path, seed=2)
    weak_a = _softmax(0.35 * (logits + rng.normal(0, 1.5, (n, 3))))
    weak_b = _softmax(0.35 * (logits + rng.normal(0, 1.5, (n, 3))))
    flat = np.full((n, 3), 1 / 3)
    oofs = {1: weak_a, 2: weak_b, 3: flat}
    plain = greedy_selection(spec, labels, oofs)
    sel = select_ensemble(spec, labels, oofs)
    assert set(sel.weights) == {1, 2}
    assert sel.temperature < 0.8  # sharpened: the members were shrunk by 0.35
    assert sel.criterion_value < plain.criterion_value - 0.05
    ids = list(sel.weights)
    blended = blend_predictions(spec, [oofs[i] for i in ids], [sel.weights[i] for i in ids], sel.blend, sel.temperature)
    assert score_predictions(spec, labels, blended) == pytest.approx(sel.criterion_value, rel=1e-6)


def test_select_ensemble_hands_in_a_calibrated_single_member_when_it_beats_every_blend(tmp_path):
    """Leaf-classification in the ablation: greedy steps compare members before calibration,
    so an accurate but under-confident member (shrunk logits) loses to confident, less accurate
    ones; calibrated alone it is the best there is."""
    spec, rng, n, logits, labels = _three_classes(tmp_path, seed=4)
    accurate_but_shrunk = _softmax(0.2 * (logits + rng.normal(0, 0.8, (n, 3))))
    confident = {m: _softmax(1.0 * (logits + rng.normal(0, 3.0, (n, 3)))) for m in (2, 3)}
    oofs = {1: accurate_but_shrunk, **confident}
    plain = greedy_selection(spec, labels, oofs)
    assert 1 not in plain.weights or len(plain.weights) > 1  # greedy alone does not find it
    sel = select_ensemble(spec, labels, oofs)
    assert sel.weights == {1: 1} and sel.temperature < 0.5
    assert score_predictions(spec, labels, blend_predictions(spec, [oofs[1]], [1], "mean", sel.temperature)) == pytest.approx(sel.criterion_value, rel=1e-6)


def test_select_ensemble_keeps_the_plain_mean_for_regression(tmp_path):
    spec = make_task(tmp_path / "t", "regression", metric="rmse")
    rng = np.random.default_rng(3)
    y = rng.normal(0, 1, 1000)
    oofs = {1: (y + rng.normal(0, 0.5, y.size))[:, None], 2: (y + rng.normal(0, 0.5, y.size))[:, None]}
    sel = select_ensemble(spec, y[:, None], oofs)
    assert sel.blend == "mean" and sel.temperature == 1.0 and set(sel.weights) == {1, 2}


def _partial_sales(rng, n):
    """Log-price-like rows where a few labels are gross errors (the house-prices pattern).

    Member 1 (a linear model) is accurate on the ordinary rows and follows the features on the
    bad rows; member 2 (trees) is noisier everywhere but, not extrapolating, lands nearer the
    bad labels. Returns (y, oofs, bad rows, fresh clean rows' (y, predictions))."""
    def draw(n, n_bad):
        f = rng.normal(12.0, 0.4, n)
        y = f.copy()
        bad = rng.choice(n, n_bad, replace=False)
        y[bad] -= 1.5  # sold far under what the features say
        lin = f + rng.normal(0, 0.08, n)
        trees = f + rng.normal(0, 0.12, n)
        trees[bad] = y[bad] + 0.7  # shrunk toward the label, still far off
        return y, lin, trees, bad

    y, lin, trees, bad = draw(n, 10)
    fresh = draw(n, 0)
    to_price = np.expm1
    oofs = {1: to_price(lin)[:, None], 2: to_price(trees)[:, None]}
    return to_price(y)[:, None], oofs, bad, (to_price(fresh[0])[:, None], {1: to_price(fresh[1])[:, None], 2: to_price(fresh[2])[:, None]})


def test_gross_error_rows_flags_the_few_labels_every_member_misses_and_nothing_on_clean_data(tmp_path):
    spec = make_task(tmp_path / "t", "regression", metric="rmsle")
    rng = np.random.default_rng(7)
    y, oofs, bad, (y_clean, oofs_clean) = _partial_sales(rng, 1500)
    keep = gross_error_rows(spec, y, oofs)
    assert keep is not None and set(np.flatnonzero(~keep)) == set(bad)
    assert gross_error_rows(spec, y_clean, oofs_clean) is None  # Gaussian tails only
    assert gross_error_rows(spec, y, oofs, threshold=0) is None  # the setting's "off"
    mae = make_task(tmp_path / "m", "regression", metric="mae")
    assert gross_error_rows(mae, y, oofs) is None  # absolute error is robust already
    # more than 1 % of the rows far out: a heavy tail of the data, not a few bad labels
    many = y.copy()
    many[:30] = many[:30] * 0.2
    assert gross_error_rows(spec, many, oofs) is None


def test_selection_without_gross_errors_weights_members_by_their_error_on_ordinary_rows(tmp_path):
    """Ten bad labels of 1500 decide a squared-error selection: they pull the weights to the
    member that misses them least, though it is the worse one on every other row. Left out of
    the selection (not of the score), the weights come back to the inverse-variance optimum on
    ordinary rows, and the blend is better on fresh rows without such labels."""
    spec = make_task(tmp_path / "t", "regression", metric="rmsle")
    rng = np.random.default_rng(7)
    y, oofs, bad, (y_fresh, fresh) = _partial_sales(rng, 1500)
    plain = greedy_selection(spec, y, oofs, gross_error_sd=0)
    trimmed = greedy_selection(spec, y, oofs)
    assert plain.excluded_rows == 0 and trimmed.excluded_rows == 10

    def linear_share(sel):
        return sel.weights.get(1, 0) / sum(sel.weights.values())

    optimum = (1 / 0.08**2) / (1 / 0.08**2 + 1 / 0.12**2)  # 0.69
    assert abs(linear_share(trimmed) - optimum) <= 0.1, trimmed.weights
    assert linear_share(plain) < optimum - 0.15, plain.weights

    def fresh_score(sel):
        ids = list(sel.weights)
        return score_predictions(spec, y_fresh, blend_predictions(spec, [fresh[i] for i in ids], [sel.weights[i] for i in ids]))

    assert fresh_score(trimmed) < fresh_score(plain)
    # the criterion value is the trimmed rows' RMSLE, the score of every row is unchanged
    ids = list(trimmed.weights)
    blend = blend_predictions(spec, [oofs[i] for i in ids], [trimmed.weights[i] for i in ids])
    keep = np.ones(len(y), bool)
    keep[bad] = False
    assert trimmed.criterion_value == pytest.approx(score_predictions(spec, y[keep], blend[keep]), rel=1e-9)


def test_an_ensemble_node_program_reproduces_the_engine_blend(tmp_path):
    """The ensemble node's program (rendered from the template) computes the blend and
    temperature the engine selected: its engine score equals the selection's criterion."""
    task = make_task(tmp_path / "t", "multiclass", n=400, metric="log_loss")
    settings = SearchSettings(time_budget_s=600, num_drafts=3, max_nodes=4, seed=0, policy="tree")
    search = create_search(task, tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression", "model.knn", "model.random_forest")))
    search.run()
    ens = [n for n in search.nodes() if n.operator is Operator.ENSEMBLE]
    assert len(ens) == 1 and ens[0].state is NodeState.VALID, ens[0].error if ens else None
    cfg = ens[0].config
    assert cfg["blend"] in ("mean", "geometric") and 0.25 <= cfg["temperature"] <= 4.0
    rows = search.labels.validated_rows
    from mcgs.evaluation import read_predictions
    from mcgs.contract import OOF_PATH

    by_id = {n.id: n for n in search.nodes()}
    members = [int(i) for i in cfg["weights"]]
    preds = [read_predictions(search.task, search.node_dir(by_id[i]), OOF_PATH, rows) for i in members]
    blended = blend_predictions(search.task, preds, [cfg["weights"][str(i)] for i in members], cfg["blend"], cfg["temperature"])
    assert ens[0].score == pytest.approx(score_predictions(search.task, search.labels.y[rows], blended), rel=1e-4)


@pytest.fixture(scope="module")
def demo_task(tmp_path_factory):
    return build_demo_task(tmp_path_factory.mktemp("demo") / "task")


def test_stacking_node_runs_in_a_search_and_is_reviewed(demo_task, tmp_path):
    settings = SearchSettings(time_budget_s=600, num_drafts=3, max_nodes=4, seed=0, policy="tree", ensemble_method="stacking")
    search = create_search(demo_task, tmp_path / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression", "model.lightgbm", "model.knn")))
    search.run()
    ens = [n for n in search.nodes() if n.operator is Operator.ENSEMBLE]
    assert len(ens) == 1 and ens[0].state is NodeState.VALID, ens[0].error if ens else None
    assert ens[0].config["method"] == "stacking" and "Stacking" in ens[0].plan
    assert ens[0].plan.startswith(FINAL_ENSEMBLE_TAG)  # for a reader
    assert ens[0].role is NodeRole.FINAL_ENSEMBLE  # what choose_final recognises it by
    assert ens[0].review["verdict"] == "passed"
    singles = [n.score for n in search.nodes() if n.is_valid and n.operator is not Operator.ENSEMBLE]
    assert ens[0].score > min(singles) - 0.01  # an honest second level is not far below its members


def _node(seq: int, score: float, operator=Operator.IMPROVE, nested: float | None = None) -> FrozenNode:
    config = {} if nested is None else {"nested_score": nested}
    return FrozenNode(id=seq + 1, seq=seq, parent_id=1, operator=operator, state=NodeState.VALID, score=score, config=config)


def test_the_final_choice_gives_the_one_standard_error_slack_only_to_ensembles_built_after_the_best_node():
    """Nomad2018 in the ablation (mcgs, seed 0): an ensemble built at node 11 (cross-fitted RMSLE
    0.06127) was handed in instead of node 19 (0.06019), because it lay within one standard error
    of it, though it never saw node 19. Only an ensemble built after the best node gets the slack."""
    best = _node(19, 0.06019)
    stale = _node(11, 0.06108, Operator.ENSEMBLE, nested=0.06127)
    calls = []

    def se():
        calls.append(1)
        return 0.002

    assert choose_final(best, [stale], higher_is_better=False, standard_error=se) is best
    assert calls == []  # not needed: a stale ensemble must simply be at least as good
    late = _node(21, 0.06000, Operator.ENSEMBLE, nested=0.06090)  # worse than the best by 0.0007 < SE
    assert choose_final(best, [stale, late], higher_is_better=False, standard_error=se) is late and calls == [1]
    assert choose_final(best, [late], higher_is_better=False, standard_error=lambda: 0.0005) is best  # outside one SE
    good_stale = _node(12, 0.0600, Operator.ENSEMBLE, nested=0.06010)  # better than the best even cross-fitted
    assert choose_final(best, [stale, late, good_stale], higher_is_better=False, standard_error=se) is good_stale
    # higher is better (AUC): the OOF score alone when no cross-fitted score was stored; latest among equals
    auc_best = _node(5, 0.90)
    a, b = _node(6, 0.905, Operator.ENSEMBLE), _node(9, 0.905, Operator.ENSEMBLE)
    assert choose_final(auc_best, [a, b], higher_is_better=True, standard_error=se) is b
    assert choose_final(auc_best, [_node(3, 0.899, Operator.ENSEMBLE)], higher_is_better=True, standard_error=se) is auc_best


def test_once_the_final_ensemble_exists_in_search_ensembles_no_longer_compete():
    """Leaf-classification, campaign seed 0: an in-search ensemble with the best cross-fitted
    score (node 40) was handed in (private log loss 0.048) over the final ensemble (0.014)."""
    best = _node(30, 0.0300)
    lucky = dataclasses.replace(_node(40, 0.0240, Operator.ENSEMBLE, nested=0.0255), plan="[ensemble during the search] greedy ...")
    final = dataclasses.replace(_node(58, 0.0250, Operator.ENSEMBLE, nested=0.0270), plan="[final ensemble] greedy ...", role=NodeRole.FINAL_ENSEMBLE)
    se = lambda: 0.002  # noqa: E731
    assert choose_final(best, [lucky], higher_is_better=False, standard_error=se) is lucky  # before the end: as before
    assert choose_final(best, [lucky, final], higher_is_better=False, standard_error=se) is final
    # the final ensemble still has to pass the same test against the best single node
    poor = dataclasses.replace(final, config={"nested_score": 0.0400})
    assert choose_final(best, [lucky, poor], higher_is_better=False, standard_error=se) is best


def test_binary_roc_auc_selection_fits_no_temperature_because_none_can_change_it(tmp_path, monkeypatch):
    """For a binary task scored by ROC AUC the selection skips temperature scaling: dividing the
    blend's log-odds by any temperature keeps the order of rows, so the criterion is unchanged."""
    from mcgs.ensemble import _from_logits, _to_logits

    spec = make_task(tmp_path / "t", "binary", metric="roc_auc")
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 400) == 1
    # under-confident members (squeezed towards 0.5): for log loss a temperature below 1 would pay
    oofs = {i: np.clip(0.5 + (y - 0.5) * rng.uniform(0.05, 0.4) + rng.normal(0, 0.25, 400), 0.01, 0.99)[:, None] for i in range(4)}
    import mcgs.ensemble

    def no_fit(*args, **kwargs):
        raise AssertionError("a temperature was fitted for a ranking criterion")

    monkeypatch.setattr(mcgs.ensemble, "_fit_temperature", no_fit)
    sel = select_ensemble(spec, y, oofs)
    assert sel.temperature == 1.0 and len(sel.weights) >= 2
    _, score, _ = selection_criterion(spec, y)
    blended = blend_predictions(spec, [oofs[i] for i in sel.weights], list(sel.weights.values()), sel.blend)
    for t in (0.3, 2.5):
        assert score(_from_logits(spec, _to_logits(spec, blended) / t)) == pytest.approx(sel.criterion_value, abs=1e-12)
