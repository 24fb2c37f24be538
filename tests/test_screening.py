"""Multi-plan drafting: plans are screened on a row subsample and the best is drafted first;
the screening subsample keeps the task's format and class balance; a resumed run reuses the
stored ranking."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.node import Operator
from mcgs.screening import build_screen_task
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings
from mcgs.task import load_task


@pytest.fixture(scope="module")
def demo_task(tmp_path_factory):
    return build_demo_task(tmp_path_factory.mktemp("demo") / "task")


class SlowFirstPlan:
    """The first plan it writes hangs (as a too-heavy model would); the others are recipes."""

    name = "slow-first"

    def __init__(self):
        self.inner = RecipeCoder(models=("model.logistic_regression", "model.knn", "model.lightgbm"))
        self.drafts = 0

    def write(self, request: CoderRequest) -> CoderAnswer:
        ans = self.inner.write(request)
        if request.operator is Operator.DRAFT:
            self.drafts += 1
            if self.drafts == 1:
                return dataclasses.replace(ans, code="import time\ntime.sleep(600)\n" + ans.code, plan="HANGS " + ans.plan)
        return ans


def _settings(**kw):
    base = dict(time_budget_s=600, per_run_timeout_s=20, num_drafts=1, max_nodes=1, seed=0, ensemble=False, policy="tree", screen_timeout_s=10, screen_share=0.3)
    return SearchSettings(**(base | kw))


@pytest.mark.slow
def test_screening_drafts_the_best_plan_first(demo_task, tmp_path):
    # the hanging plan sleeps 600 s: a 5-s limit is enough wherever only it is run
    plain = create_search(demo_task, tmp_path / "plain", settings=_settings(plan_candidates=0, per_run_timeout_s=5), coder=SlowFirstPlan())
    first = plain.step()
    assert first.plan.split("] ", 1)[1].startswith("HANGS") and first.state.value == "timeout"  # without screening: the coder's order

    search = create_search(demo_task, tmp_path / "run", settings=_settings(plan_candidates=3), coder=SlowFirstPlan())
    search.run()
    draft = next(n for n in search.nodes() if n.operator is Operator.DRAFT)
    assert draft.is_valid and "HANGS" not in draft.plan and "screened:" in draft.plan
    stored = json.loads((tmp_path / "run" / "screen" / "plans.json").read_text())
    states = [p["state"] for p in stored["plans"]]
    assert states == ["valid", "timeout", "valid"]  # the better valid half, then the unjudged plan, then the rest
    scores = [p["score"] for p in stored["plans"] if p["score"] is not None]
    assert scores[0] >= scores[1]  # accuracy: higher first
    assert stored["rows"] == min(2000, demo_task_rows(demo_task))

    # a resumed run with more nodes takes the next plans from the stored ranking, no re-screening
    coder = SlowFirstPlan()
    again = open_search(tmp_path / "run", coder=coder)
    again.settings = again.settings.model_copy(update={"num_drafts": 2, "max_nodes": 2, "per_run_timeout_s": 5})
    again.run()
    drafts = [n for n in again.nodes() if n.operator is Operator.DRAFT]
    assert len(drafts) == 2 and "screening: timeout" in drafts[1].plan and coder.drafts == 0
    assert drafts[1].state.value == "timeout"  # it did hang: the screening was right not to rank it first


def demo_task_rows(folder) -> int:
    return load_task(folder).n_train


def test_screen_subsample_is_stratified_and_keeps_json_records(tmp_path):
    rows = [{"rid": f"r{i}", "text": f"word {i % 7} and more words", "stars": [1, 2], "label": i % 10 == 0} for i in range(3000)]
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "train.json").write_text(json.dumps(rows))
    (folder / "test.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "label"} for r in rows[:700]]))
    pd.DataFrame({"rid": [r["rid"] for r in rows[:700]], "label": 0.5}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "task.yaml").write_text("metric: roc_auc\ntrain_file: train.json\ntest_file: test.json\n")
    spec = load_task(folder)
    screen = build_screen_task(spec, tmp_path / "screen", max_rows=500, seed=0)
    sub = json.loads((tmp_path / "screen" / "train.json").read_text())
    assert screen.n_train == len(sub) == 500 and screen.n_test == 300
    assert sum(r["label"] for r in sub) == 50  # 10 % positives, as in the full table
    assert sub[0]["stars"] == [1, 2]  # records keep their JSON shape
    assert load_task(folder).n_train == 3000  # the task itself is untouched


class SlowOnManyRows(SlowFirstPlan):
    """Its first plan is slow only on the full subsample (as a heavy model on a busy machine)."""

    def write(self, request: CoderRequest) -> CoderAnswer:
        ans = self.inner.write(request)
        if request.operator is Operator.DRAFT:
            self.drafts += 1
            if self.drafts == 1:
                slow = ("import time, pandas\nif len(pandas.read_csv('input/folds.csv')) > 300:\n    time.sleep(600)\n")
                return dataclasses.replace(ans, code=slow + ans.code, plan="SLOW " + ans.plan)
        return ans


@pytest.mark.slow
def test_a_plan_out_of_time_is_screened_again_on_fewer_rows_and_not_ranked_behind_the_better_half(demo_task, tmp_path):
    search = create_search(demo_task, tmp_path / "run", settings=_settings(plan_candidates=3), coder=SlowOnManyRows())
    search.run()
    stored = json.loads((tmp_path / "run" / "screen" / "plans.json").read_text())["plans"]
    full_rows = demo_task_rows(demo_task)
    assert [(p["plan"][:4] == "SLOW", p["state"], p["slow"], p["rows"]) for p in stored] == [
        (False, "valid", False, full_rows), (True, "valid", True, 200), (False, "valid", False, full_rows)]
    slow = stored[1]
    assert slow["score"] is not None and slow["runtime_s"] < 60  # judged on 200 rows instead of dropped
    # a resumed run drafts it second, saying on how many rows it was screened
    again = open_search(tmp_path / "run", coder=SlowOnManyRows())
    again.settings = again.settings.model_copy(update={"num_drafts": 2, "max_nodes": 2, "per_run_timeout_s": 5})
    again.run()
    second = [n for n in again.nodes() if n.operator is Operator.DRAFT][1]
    assert "on a subsample of 200 rows, after running out of time on more rows" in second.plan


class FixedCosts:
    """A cost model with fixed predictions: ``seconds[model]`` on all the task's rows, in
    proportion to the rows below; it records what the screening lets it observe."""

    def __init__(self, n_train: int, seconds: dict[str, float]):
        self.profile, self.seconds, self.observed = {"n_train": n_train}, seconds, []

    def predict_s(self, config, fidelity=1.0):
        return self.seconds[config["model"]] * fidelity

    prior_s = predict_s

    def observe(self, config, actual_s, fidelity=1.0):
        self.observed.append((config["model"], round(fidelity, 2)))


def _sleeps_on_many_rows(answer: CoderAnswer) -> CoderAnswer:
    slow = "import time, pandas\nif len(pandas.read_csv('input/folds.csv')) > 300:\n    time.sleep(600)\n"
    return dataclasses.replace(answer, code=slow + answer.code)


@pytest.mark.slow
def test_slow_plans_are_judged_on_fewer_rows_even_when_the_full_pass_spends_the_share(demo_task, tmp_path):
    """Every plan overruns its part of the share on the full subsample (a slow machine): the
    low pass still gets half the share on top, takes the plans in the knowledge base's order
    (logistic regression, priority 2, before k-NN, 4), and skips a plan the cost model predicts
    far beyond its part (LightGBM: never run on the full subsample, not run on the small one
    either, as it cannot finish in what is left)."""
    import time

    from mcgs.branches import Expansion
    from mcgs.operators import OperatorContext, build_request
    from mcgs.screening import LOW_PASS_SHARE, rank_plans, run_screen

    search = create_search(demo_task, tmp_path / "run", settings=_settings(plan_candidates=0))
    spec, root = search.task, next(n for n in search.nodes() if n.parent_id is None)

    def plan(model):
        ctx = OperatorContext(graph=search.graph(), task=spec, profile=search.profile, settings=search.settings, seed=1)
        return RecipeCoder(models=(model,)).write(build_request(ctx, Expansion(parent_id=root.id, operator=Operator.DRAFT, reason="plan")))

    plans = [_sleeps_on_many_rows(plan("model.knn")), _sleeps_on_many_rows(plan("model.logistic_regression")), plan("model.lightgbm")]
    costs = FixedCosts(spec.n_train, {"model.knn": 1.0, "model.logistic_regression": 1.0, "model.lightgbm": 200.0})
    screen = build_screen_task(spec, tmp_path / "task", spec.n_train, seed=0)
    share = 20.0
    t0 = time.monotonic()
    results = run_screen(plans, screen, tmp_path / "screen", timeout_s=60, time_share_s=share, threads=1, memory_mb=2048, costs=costs)
    took = time.monotonic() - t0
    knn, logistic, gbm = results
    assert knn.state in ("timeout", "valid") and knn.rows in (spec.n_train, 200)  # judged second only if time was left
    assert (logistic.state, logistic.slow, logistic.rows) == ("valid", True, 200)  # judged first on 200 rows
    assert gbm.state == "skipped" and not gbm.slow and gbm.runtime_s == 0 and "predicted 200s" in gbm.error
    assert ("model.logistic_regression", round(200 / spec.n_train, 2)) in costs.observed
    assert took < (1 + LOW_PASS_SHARE) * share + 10  # the full pass's share and the low pass's half on top
    ranked = [r.answer.config["model"] for r in rank_plans(results, spec.higher_is_better)]
    assert ranked.index("model.logistic_regression") < ranked.index("model.lightgbm")


def test_ranking_compares_scores_within_one_fidelity_only():
    from mcgs.screening import PlanResult, rank_plans

    def plan(name, state, score=None, slow=False, runtime=1.0):
        return PlanResult(answer=CoderAnswer(plan=name, code="", config={}), state=state, score=score, slow=slow, runtime_s=runtime)

    results = [plan("knn", "valid", 0.80), plan("gbm", "valid", 0.70, slow=True), plan("catboost", "timeout", slow=True),
               plan("linear", "valid", 0.85), plan("rf", "valid", 0.85, runtime=0.5), plan("nb", "buggy"),
               plan("mlp", "skipped"), plan("svm", "valid", 0.90, slow=True)]
    order = [r.answer.plan for r in rank_plans(results, higher_is_better=True)]
    # the slow plan that beat the best full-subsample plan on fewer rows (svm 0.90 against rf
    # 0.85), that plan, the other slow ones (gbm, worse on fewer rows: not comparable), the
    # unjudged in the coder's order, the other full-subsample plans, the failed
    assert order == ["svm", "rf", "gbm", "catboost", "mlp", "linear", "knn", "nb"]
    # lower is better: gbm (0.70 on fewer rows) beats knn (0.80), svm (0.90) does not
    order = [r.answer.plan for r in rank_plans(results, higher_is_better=False)]
    assert order == ["gbm", "knn", "svm", "catboost", "mlp", "rf", "linear", "nb"]


def test_the_screening_subsample_grows_with_the_data_within_its_bounds():
    from mcgs.screening import screen_rows_for

    assert screen_rows_for(426, 2000) == 426  # the demo: all of its rows
    assert screen_rows_for(8_693, 2000) == 2000  # spaceship-titanic: as before
    assert screen_rows_for(52_000, 2000) == 5_200  # a tenth
    assert screen_rows_for(1_131_675, 2000) == 20_000  # capped at ten times screen_rows


def test_a_subsample_of_many_small_classes_gets_folds_it_can_split(tmp_path):
    """leaf-classification's shape: many classes of a few rows each. A quarter of the rows keeps
    one or two rows of a class, fewer than the task's five stratified folds: the subsample is
    validated with as many folds as its rarest class has rows, or plain folds when it has one."""
    import numpy as np

    from mcgs.contract import prepare_run_input

    rng = np.random.default_rng(0)
    task = tmp_path / "task"
    task.mkdir()
    labels = np.repeat([f"c{k}" for k in range(60)], 6)
    train = pd.DataFrame({"id": range(len(labels)), "x": rng.normal(size=len(labels)), "label": labels})
    train.to_csv(task / "train.csv", index=False)
    pd.DataFrame({"id": range(1000, 1020), "x": rng.normal(size=20)}).to_csv(task / "test.csv", index=False)
    pd.DataFrame({"id": range(1000, 1020), "label": "c0"}).to_csv(task / "sample_submission.csv", index=False)
    (task / "task.yaml").write_text("metric: accuracy\nvalidation: {kind: stratified_kfold, n_splits: 5}\n")
    spec = load_task(task)
    for rows, kind, splits in ((180, "stratified_kfold", 3), (120, "stratified_kfold", 2), (40, "kfold", 5)):
        sub = build_screen_task(spec, tmp_path / f"sub{rows}", rows, seed=0)
        assert (sub.validation.kind, sub.validation.n_splits) == (kind, splits)
        folds = pd.read_csv(prepare_run_input(sub, tmp_path / f"in{rows}") / "folds.csv")
        assert len(folds) == rows and folds["fold"].nunique() == splits
