"""Each operator module on its own: when it proposes itself at a node (``propose``), the edges
it stores, its prompt template, and the recipe coder's step for it (``recipe_step``), on
hand-built graphs and a small generated task."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mcgs import operators
from mcgs.coders import CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.node import EdgeKind, FrozenNode, NodeState, Operator
from mcgs.operators import aggregate, debug, draft, evolve, fusion, improve
from mcgs.profile import profile_task
from mcgs.settings import SearchSettings
from recipe_runs import make_task
from policy_graphs import graph, stagnant_branch

M = SearchSettings(policy="mcgs")
V, B, R = NodeState.VALID, NodeState.BUGGY, NodeState.RUNNING
D, DBG, IMP, EVO, FUS, AGG = Operator.DRAFT, Operator.DEBUG, Operator.IMPROVE, Operator.EVOLVE, Operator.FUSION, Operator.AGGREGATE


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    spec = make_task(tmp_path_factory.mktemp("operators") / "t", "binary")
    return spec, profile_task(spec)


def _node(nid, op, state=V, score=None, config=None, parent=0, **kw):
    return FrozenNode(id=nid, seq=nid, parent_id=parent, operator=op, state=state, score=score, config=config or {}, **kw)


def test_every_operator_a_coder_serves_has_one_module_with_the_whole_protocol():
    assert set(operators.MODULES) == {D, DBG, IMP, EVO, FUS, AGG}
    prompts = Path(operators.__file__).parent / "prompts"
    for op, module in operators.MODULES.items():
        assert module.OPERATOR is op
        assert callable(module.propose) and callable(module.build_request) and callable(module.recipe_step)
        assert (prompts / module.PROMPT).is_file(), module.PROMPT
    # the policy asks the node operators in this order; Aggregate looks at the whole graph
    assert [m.OPERATOR for m in operators.AT_NODE] == [D, DBG, FUS, EVO, IMP]


def test_draft_proposes_itself_at_the_root_until_the_drafts_are_made(task):
    spec, prof = task
    two = graph([(1, 0, D, V, 0.8, 2.0), (2, 0, D, B, None, -1.0)])
    s = M.model_copy(update={"num_drafts": 3})
    assert draft.propose(two, 0, s, True).reason == "draft 3 of 3"
    assert draft.propose(two, 0, M.model_copy(update={"num_drafts": 2}), True) is None
    assert draft.propose(two, 1, s, True) is None  # a valid node is not the root
    # an interrupted draft does not count against the number
    cut = graph([(1, 0, D, V, 0.8, 2.0), (2, 0, D, NodeState.INTERRUPTED, None, None)])
    assert draft.propose(cut, 0, M.model_copy(update={"num_drafts": 2}), True) is not None
    # the recipe step drafts a family no sibling drafted
    coder = RecipeCoder()
    first = _node(1, D, config=coder.default_config("model.lightgbm", prof))
    config, plan = draft.recipe_step(coder, CoderRequest(operator=D, task=spec, profile=prof, siblings=(first,), seed=1), random.Random(0))
    assert config["model"] != "model.lightgbm" and config["change"] == "draft" and plan.startswith("Draft: ")


def test_a_draft_too_dear_for_its_limit_gets_fewer_rounds_and_a_higher_learning_rate(task):
    """On 140 000 rows (below LightGBM's scale_params), four classes and three folds the default
    LightGBM program (stopped early, then boosted again on each whole training fold) is predicted
    at about 47 s: under a 78 s limit the draft boosts about half the rounds at about twice the
    rate, and says so in its plan; under a 30-minute limit, and on the small table, it is the
    default."""
    spec, prof = task
    coder = RecipeCoder()
    big = prof | {"n_train": 140_000, "n_features": 5, "n_text": 0, "task_kind": "multiclass", "n_classes": 4}
    default = coder.default_config("model.lightgbm", big)

    def draft(profile, limit_s):
        req = CoderRequest(operator=D, task=spec, profile=profile, per_run_timeout_s=limit_s)
        return draft_step(coder, req)

    config, plan = draft(big, 78.0)
    assert config["model"] == "model.lightgbm"  # the first family drafted
    assert 0.4 < config["params"]["n_estimators"] / default["params"]["n_estimators"] < 0.7
    assert config["params"]["learning_rate"] == pytest.approx(default["params"]["learning_rate"] * default["params"]["n_estimators"] / config["params"]["n_estimators"], rel=1e-3)
    assert "Made cheaper for this data (n_estimators 600 ->" in plan and "limit of 78s" in plan
    roomy = draft(big, 1800.0)[0]
    assert roomy["params"] == coder.default_config(roomy["model"], big)["params"]
    small = draft(prof, 150.0)
    assert small[0]["params"] == coder.default_config(small[0]["model"], prof)["params"] and "cheaper" not in small[1]


def draft_step(coder, req):
    return draft.recipe_step(coder, req, random.Random(0))


def test_debug_proposes_itself_at_a_failed_node_within_the_depth_limit(task):
    spec, prof = task
    g = graph([(1, 0, D, B, None, -1.0), (2, 1, DBG, B, None, -1.0), (3, 0, D, V, 0.8, 2.0)])
    assert debug.propose(g, 1, M, True) is None  # one debug child already (num_debug_children=1)
    assert debug.propose(g, 2, M, True).reason == "debug buggy node (depth 2)"
    assert debug.propose(g, 2, M.model_copy(update={"max_debug_depth": 1}), True) is None
    assert debug.propose(g, 3, M, True) is None  # valid nodes are improved, not debugged
    coder = RecipeCoder()
    cfg = coder.default_config("model.lightgbm", prof)
    slow = _node(1, D, NodeState.OOM, config=cfg | {"n_seeds": 3}, error="out of memory")
    config, plan = debug.recipe_step(coder, CoderRequest(operator=DBG, task=spec, profile=prof, parent=slow, seed=1), random.Random(0))
    assert config["change"] == "debug:oom" and config["n_seeds"] == 1
    assert config["params"]["n_estimators"] == cfg["params"]["n_estimators"] // 2 and "cheaper" in plan


def test_improve_proposes_its_tier_at_a_valid_search_node(task):
    spec, prof = task
    g = graph(stagnant_branch())
    assert improve.propose(g, 2, M, True).tier == 0  # branch 2: nothing after its best
    two = M.model_copy(update={"num_improve_children": 2})
    assert improve.propose(g, 13, two, True) is None  # two improve children already
    assert improve.propose(g, 13, M, True).tier == 1  # room for a third by default
    assert improve.propose(g, 16, M, True).tier == 1  # three valid nodes since branch 1's best
    assert improve.propose(g, 3, M, True) is None  # failed: Debug's
    ens = graph([(1, 0, D, V, 0.8, 2.0), (2, 0, Operator.ENSEMBLE, V, 0.9, 2.0)])
    assert improve.propose(ens, 2, M, True) is None
    coder = RecipeCoder()
    parent = _node(1, D, score=0.8, config=coder.default_config("model.lightgbm", prof))
    sibling = _node(2, IMP, parent=1, config=parent.config | {"change": "feature:count_encoding"})
    config, plan = improve.recipe_step(coder, CoderRequest(operator=IMP, task=spec, profile=prof, parent=parent, siblings=(sibling,), tier=1, seed=3), random.Random(0))
    assert config["change"].startswith("feature:") and config["change"] != "feature:count_encoding"
    assert plan.startswith("Improve (features) node 1")


def test_fusion_proposes_the_stagnant_branch_best_with_other_branches_and_fuses_every_input(task):
    spec, prof = task
    g = graph(stagnant_branch())
    exp = fusion.propose(g, 16, M, True)  # any node of the stagnant branch leads to its best
    assert (exp.parent_id, exp.operator, exp.references) == (13, FUS, (2, 4))
    assert fusion.propose(g, 2, M, True) is None  # branch 2 is not stagnant
    assert fusion.propose(g, 16, M.model_copy(update={"graph_children": 0}), True) is None
    # after one Fusion child the turn is Evolve's
    g2 = graph(stagnant_branch() + [(20, 13, FUS, R, None, None)])
    assert fusion.propose(g2, 13, M, True) is None and evolve.propose(g2, 13, M, True) is not None
    assert fusion.edges(exp) == [(13, EdgeKind.FUSES, {}), (2, EdgeKind.FUSES, {}), (4, EdgeKind.FUSES, {})]
    coder = RecipeCoder()
    a = coder.default_config("model.lightgbm", prof)
    b = a | {"features": {**a["features"], "count_encoding": True}}
    best = _node(13, IMP, score=0.81, config=a, runtime_s=5.0)
    other = _node(2, D, score=0.78, config=b, runtime_s=5.0)
    config, plan = fusion.recipe_step(coder, CoderRequest(operator=FUS, task=spec, profile=prof, parent=best, references=(other,), per_run_timeout_s=60.0, seed=4), random.Random(0))
    assert config["features"]["count_encoding"] and config["change"] == "fusion:merge"
    assert "keep the strongest model (node 13" in plan


def test_evolve_reads_the_branch_history_and_reapplies_what_helped(task):
    spec, prof = task
    g2 = graph(stagnant_branch() + [(20, 13, FUS, R, None, None)])
    exp = evolve.propose(g2, 13, M, True)
    assert (exp.parent_id, set(exp.references)) == (13, {1, 11, 12, 14, 15, 16})
    assert operators.edges(exp) == [(i, EdgeKind.REFERENCES, {}) for i in exp.references]
    assert evolve.propose(graph(stagnant_branch()[:-1]), 13, M, True) is None  # two since the best: not stagnant
    coder = RecipeCoder()
    base = coder.default_config("model.lightgbm", prof)
    lower = base | {"params": {**base["params"], "num_leaves": 7}}
    p = _node(1, D, score=0.70, config=base)
    helped = _node(2, IMP, parent=1, score=0.75, config=lower)
    best = _node(3, IMP, parent=1, score=0.80, config=base | {"n_seeds": 2})
    config, plan = evolve.recipe_step(coder, CoderRequest(operator=EVO, task=spec, profile=prof, parent=best, references=(p, helped), seed=5), random.Random(0))
    assert config["params"]["num_leaves"] == 7 and config["change"] == "evolve:reapply"
    assert "num_leaves=7 (node 2)" in plan


def test_aggregate_proposes_itself_once_per_global_stagnation_and_fuses_the_branch_bests(task):
    spec, prof = task
    stagnant = stagnant_branch() + [(17, 2, IMP, V, 0.70, 0.1)]
    exp = aggregate.propose(graph(stagnant), M, True)
    assert (exp.parent_id, exp.references) == (0, (13, 2, 4))
    assert aggregate.edges(exp) == [(13, EdgeKind.FUSES, {}), (2, EdgeKind.FUSES, {}), (4, EdgeKind.FUSES, {})]
    assert aggregate.propose(graph(stagnant_branch()), M, True) is None  # node 13 was a new best lately
    assert aggregate.propose(graph(stagnant + [(30, 0, AGG, V, 0.7, 0.1)]), M, True) is None  # once per spell
    coder = RecipeCoder()
    a = _node(13, IMP, score=0.81, config=coder.default_config("model.lightgbm", prof), runtime_s=3.0)
    b = _node(2, D, score=0.78, config=coder.default_config("model.logistic_regression", prof), runtime_s=1.0)
    config, plan = aggregate.recipe_step(coder, CoderRequest(operator=AGG, task=spec, profile=prof, references=(a, b), per_run_timeout_s=60.0, seed=6), random.Random(0))
    assert config["model"] == "model.lightgbm" and config["change"] == "aggregate:merge"
    assert plan.startswith("Aggregate of node 13")


def test_each_operator_says_when_the_recipe_coder_cannot_build_on_its_inputs(task):
    """An LLM program or a baseline script has no recipe config: Debug, Improve and Evolve
    cannot change such a parent, Fusion and Aggregate need one valid input that has one; the
    recipe coder then drafts afresh and says why in the plan."""
    spec, prof = task
    coder = RecipeCoder()
    recipe = _node(3, D, score=0.8, config=coder.default_config("model.lightgbm", prof))
    llm = _node(4, D, score=0.9, config={})
    broken = _node(5, D, state=B, config=coder.default_config("model.lightgbm", prof))
    assert set(operators.RECIPE_FOREIGN) == {DBG, IMP, EVO, FUS, AGG}  # Draft builds on nothing

    def req(op, parent=None, references=()):
        return CoderRequest(operator=op, task=spec, profile=prof, parent=parent, references=references, seed=1)

    for op in (DBG, IMP, EVO):
        assert operators.RECIPE_FOREIGN[op](req(op, parent=recipe)) is None
        assert operators.RECIPE_FOREIGN[op](req(op, parent=llm)) == "node 4 was not written by the recipe coder"
    assert operators.RECIPE_FOREIGN[DBG](req(DBG, parent=broken)) is None  # a failed recipe node is fixable
    assert fusion.recipe_foreign(req(FUS, parent=llm, references=(recipe,))) is None
    assert fusion.recipe_foreign(req(FUS, parent=llm, references=(broken,))) == "none of the inputs was written by the recipe coder"
    assert aggregate.recipe_foreign(req(AGG, references=(llm, broken))) == "none of the inputs was written by the recipe coder"
    answer = coder.write(req(IMP, parent=llm))
    assert answer.plan.startswith("(node 4 was not written by the recipe coder; the recipe coder writes a fresh draft)")
    assert answer.config["change"] == "draft"


def test_improve_credits_each_change_with_its_relative_gain_over_a_parent_of_its_fidelity(task):
    lgbm = {"model": "model.lightgbm"}
    nodes = [
        _node(1, D, score=0.80, config=lgbm),
        _node(2, IMP, score=0.84, config=lgbm | {"change": "param:num_leaves:up"}, parent=1),  # +5 %
        _node(3, IMP, state=B, config=lgbm | {"change": "param:num_leaves:up"}, parent=1),  # failed: gained nothing
        _node(4, IMP, score=0.78, config=lgbm | {"change": "param:learning_rate:down"}, parent=1),  # worse: 0
        _node(5, IMP, score=0.90, config=lgbm | {"change": "param:subsample:up"}, parent=1, fidelity=1 / 3),  # another fidelity
        _node(6, IMP, state=R, config=lgbm | {"change": "param:subsample:down"}, parent=1),  # not finished
    ]
    gains = improve.observed_gains(nodes, higher_is_better=True)
    assert set(gains) == {"model.lightgbm param:num_leaves:up", "model.lightgbm param:learning_rate:down", "*"}
    assert gains["model.lightgbm param:num_leaves:up"] == (2, pytest.approx(0.025))
    assert gains["model.lightgbm param:learning_rate:down"] == (1, 0.0)
    assert gains["*"] == (3, pytest.approx(0.05 / 3))
    # lower is better: a child with a lower loss gained
    down = improve.observed_gains([_node(1, D, score=0.5, config=lgbm), _node(2, IMP, score=0.4, config=lgbm | {"change": "c"}, parent=1)], False)
    assert down["model.lightgbm c"] == (1, pytest.approx(0.2))


def test_improve_draws_parameter_changes_by_expected_gain_per_second(task):
    spec, prof = task
    prof = prof | {"n_train": 300_000}  # where a fit's seconds are mostly training, not start-up
    coder = RecipeCoder()
    parent = _node(1, D, score=0.8, config=coder.default_config("model.lightgbm", prof))

    def draws(gains, n=400):
        req = CoderRequest(operator=IMP, task=spec, profile=prof, parent=parent, tier=0, move_gains=gains)
        rng = random.Random(0)
        return [improve.recipe_step(coder, req, rng)[0]["change"] for _ in range(n)]

    moves = 2 * 7  # seven parameters in LightGBM's space, up or down
    # no gains yet: only the predicted seconds differ, so more rounds (dearer) come less often than fewer
    plain = draws({})
    assert plain.count("param:n_estimators:up") < 0.7 * plain.count("param:n_estimators:down")
    assert plain.count("param:num_leaves:up") > 0.5 * len(plain) / moves  # a change that costs the same stays near its share
    # a change that has paid in this run is drawn over three times as often as its share; one that never paid, rarely
    gains = {"model.lightgbm param:num_leaves:up": (4, 0.02), "model.lightgbm param:subsample:down": (4, 0.0), "*": (12, 0.004)}
    paid = draws(gains)
    assert paid.count("param:num_leaves:up") > 3 * len(paid) / moves
    assert paid.count("param:subsample:down") < 0.5 * len(paid) / moves
    # strategy changes too: before any gain, a cheap family comes more often than a dear one
    req = CoderRequest(operator=IMP, task=spec, profile=prof, parent=parent, tier=2)
    rng = random.Random(0)
    families = [improve.recipe_step(coder, req, rng)[0]["change"] for _ in range(300)]
    assert families.count("strategy:model:model.logistic_regression") > 2 * families.count("strategy:model:model.catboost")
    # ... unless the run has scored it on this data far behind the parent (AUC 0.70 against 0.80)
    scored = CoderRequest(operator=IMP, task=spec, profile=prof, parent=parent, tier=2,
                          family_scores={"model.logistic_regression": 0.70, "model.catboost": 0.805, "model.lightgbm": 0.8})
    rng = random.Random(0)
    families = [improve.recipe_step(coder, scored, rng)[0]["change"] for _ in range(300)]
    assert families.count("strategy:model:model.logistic_regression") < 0.2 * families.count("strategy:model:model.catboost")
