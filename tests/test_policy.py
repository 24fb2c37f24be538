"""UCT selection, reward and backpropagation on hand-built graphs (DESIGN §4)."""

from __future__ import annotations

import math
import random

import pytest

from mcgs.graph import build_graph
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState, Operator
from mcgs.branches import debug_depth, improve_tier, is_branch_stagnant, is_globally_stagnant
from mcgs.policy import compute_reward, exploration_constant, select_expansion, tree_stats, uct_value
from mcgs.settings import SearchSettings
from policy_graphs import graph, stagnant_branch

S = SearchSettings(policy="tree")  # pure UCT; the graph operators are tested below with policy="mcgs"
M = SearchSettings(policy="mcgs")
V, B, R = NodeState.VALID, NodeState.BUGGY, NodeState.RUNNING


D, DBG, IMP = Operator.DRAFT, Operator.DEBUG, Operator.IMPROVE


# ----------------------------------------------------------------- reward


def test_reward_of_failures_and_first_valid_node():
    assert compute_reward(B, None, [0.5], True) == -1.0
    assert compute_reward(NodeState.TIMEOUT, None, [], True) == -1.0
    assert compute_reward(V, 0.7, [], True) == 2.0  # s~ = 1 and a new global best


def test_reward_is_min_max_normalised_and_direction_aware():
    prior = [0.70, 0.80]
    # higher is better: 0.75 sits halfway, no new best
    assert compute_reward(V, 0.75, prior, True) == pytest.approx(0.5)
    # a new best gets the bonus
    assert compute_reward(V, 0.90, prior, True) == pytest.approx(2.0)
    # lower is better: 0.75 halfway again, 0.65 is the new best
    assert compute_reward(V, 0.75, prior, False) == pytest.approx(0.5)
    assert compute_reward(V, 0.65, prior, False) == pytest.approx(2.0)
    assert compute_reward(V, 0.80, prior, False) == pytest.approx(0.0)


def test_bonus_needs_gain_above_threshold():
    assert compute_reward(V, 0.80005, [0.8], True, improvement_threshold=1e-4) == pytest.approx(1.0)
    assert compute_reward(V, 0.8002, [0.8], True, improvement_threshold=1e-4) == pytest.approx(2.0)


# ----------------------------------------------------------------- C decay


def test_exploration_constant_decays_piecewise():
    assert exploration_constant(0.0, S) == pytest.approx(1.414)
    assert exploration_constant(0.3, S) == pytest.approx(1.414)
    assert exploration_constant(0.5, S) == pytest.approx((1.414 + 0.5) / 2)
    assert exploration_constant(0.7, S) == pytest.approx(0.5)
    assert exploration_constant(1.0, S) == pytest.approx(0.5)


# ----------------------------------------------------------------- backpropagation

HAND = [
    (1, 0, D, V, 0.80, 2.0),
    (2, 1, IMP, V, 0.78, 0.5),
    (3, 1, IMP, B, None, -1.0),
    (4, 0, D, B, None, -1.0),
    (5, 4, DBG, V, 0.79, 1.2),
]


def test_backpropagation_over_primary_parents():
    st = tree_stats(graph(HAND))
    assert (st[0].visits, st[0].value) == (5, pytest.approx(1.7))
    assert (st[1].visits, st[1].value) == (3, pytest.approx(1.5))
    assert (st[4].visits, st[4].value) == (2, pytest.approx(0.2))
    assert (st[3].visits, st[3].value) == (1, pytest.approx(-1.0))


def test_uct_value_by_hand():
    st = tree_stats(graph(HAND))
    c = 1.414
    assert uct_value(st[1], st[0], c) == pytest.approx(1.5 / 3 + c * math.sqrt(math.log(5) / 3))
    assert uct_value(st[4], st[0], c) == pytest.approx(0.2 / 2 + c * math.sqrt(math.log(5) / 2))


def test_virtual_loss_counts_in_flight_nodes():
    g = graph(HAND + [(6, 1, IMP, R, None, None)])
    st = tree_stats(g, virtual_loss=-1.0)
    assert (st[1].visits, st[1].value) == (4, pytest.approx(0.5))


# ----------------------------------------------------------------- selection


def test_root_takes_drafts_until_the_limit():
    exp = select_expansion(graph(HAND), S, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert (exp.parent_id, exp.operator) == (0, D)


def five_drafts():
    return HAND + [
        (6, 0, D, B, None, -1.0),
        (7, 6, DBG, B, None, -1.0),
        (8, 0, D, V, 0.70, 0.0),
        (9, 0, D, B, None, -1.0),
    ]


def test_descends_by_uct_then_expands_with_the_right_operator():
    g = graph(five_drafts())
    st = tree_stats(g)
    c = exploration_constant(0.0, S)
    # candidates under the root: every draft with something expandable below it
    ucts = {k: uct_value(st[k], st[0], c) for k in (1, 4, 6, 8, 9)}
    best = max(ucts, key=ucts.get)
    exp = select_expansion(g, S, progress=0.0, higher_is_better=True, rng=random.Random(0))
    expected = {1: (1, IMP), 4: (5, IMP), 6: (7, DBG), 8: (8, IMP), 9: (9, DBG)}[best]
    assert (exp.parent_id, exp.operator) == expected


def test_late_exploration_constant_prefers_high_q():
    g = graph(five_drafts())
    # with C at its floor the node with the best mean reward wins: draft 1 (Q = 0.5)
    exp = select_expansion(g, S.model_copy(update={"uct_c_start": 0.0, "uct_c_end": 0.0}), progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert exp.parent_id == 1 and exp.operator is IMP


def test_buggy_node_gets_one_debug_child_and_debug_depth_is_bounded():
    g = graph(five_drafts())
    assert debug_depth(g, 7) == 1
    s = S.model_copy(update={"max_debug_depth": 1, "uct_c_start": 0.0, "uct_c_end": 0.0})
    # node 6 already has its debug child (7); node 7 is at depth 1 = the limit: nothing to do there
    for seed in range(5):
        exp = select_expansion(g, s, progress=0.0, higher_is_better=True, rng=random.Random(seed))
        assert exp.parent_id not in (6, 7)


def test_valid_node_takes_at_most_three_improve_children():
    spec = five_drafts() + [(10, 1, IMP, V, 0.79, 0.6)]
    g = graph(spec)
    s = S.model_copy(update={"uct_c_start": 0.0, "uct_c_end": 0.0})
    exp = select_expansion(g, s, progress=0.0, higher_is_better=True, rng=random.Random(0))
    # node 1 now has 3 improve children: selection goes below it to its best child
    assert exp.parent_id != 1


def test_extra_draft_when_every_branch_is_exhausted():
    spec = [(i, 0, D, B, None, -1.0) for i in range(1, 6)] + [(10 + i, i, DBG, B, None, -1.0) for i in range(1, 6)]
    s = S.model_copy(update={"max_debug_depth": 1})
    exp = select_expansion(graph(spec), s, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert (exp.parent_id, exp.operator) == (0, D)
    assert "extra draft" in exp.reason


def test_exploit_share_grows_late_in_the_budget():
    g = graph(five_drafts())
    picks = [select_expansion(g, S, progress=1.0, higher_is_better=True, rng=random.Random(k)) for k in range(200)]
    exploit = sum("exploit" in p.reason for p in picks)
    assert 60 <= exploit <= 140  # about half at the end of the budget
    assert all(p.operator is IMP for p in picks if "exploit" in p.reason)
    early = [select_expansion(g, S, progress=0.2, higher_is_better=True, rng=random.Random(k)) for k in range(50)]
    assert not any("exploit" in p.reason for p in early)


def test_improve_tier_escalates_with_branch_patience():
    spec = [(1, 0, D, V, 0.80, 2.0)]
    last = 1
    for k in range(2, 9):  # seven improve steps, none better than the draft
        spec.append((k, last, IMP, V, 0.79, 0.5))
        last = k
    g = graph(spec)
    s = S.model_copy(update={"branch_patience": 3})
    assert improve_tier(graph(spec[:3]), 3, s, True) == 0  # 2 since best
    assert improve_tier(graph(spec[:4]), 4, s, True) == 1  # 3 since best
    assert improve_tier(g, 8, s, True) == 2  # 7 since best


# ----------------------------------------------------------------- the graph (policy="mcgs")

EVO, FUS, AGG = Operator.EVOLVE, Operator.FUSION, Operator.AGGREGATE


def test_branch_and_global_stagnation_by_hand():
    g = graph(stagnant_branch())
    assert is_branch_stagnant(g, 1, M, True)  # 14, 15, 16 after the best (13)
    assert not is_branch_stagnant(graph(stagnant_branch()[:-1]), 1, M, True)  # only two
    assert not is_branch_stagnant(g, 2, M, True)
    # the last four finished nodes: 13 set a new best, so not yet stagnant globally
    assert not is_globally_stagnant(g, M)
    assert is_globally_stagnant(graph(stagnant_branch() + [(17, 2, IMP, V, 0.70, 0.1)]), M)


def test_stagnant_branch_best_gets_fusion_then_evolve():
    g = graph(stagnant_branch())
    s = M.model_copy(update={"uct_c_start": 0.0, "uct_c_end": 0.0})
    exp = select_expansion(g, s, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert (exp.parent_id, exp.operator) == (13, FUS)
    assert exp.references == (2, 4)  # the bests of the other good branches, best first
    # after a fusion child, the next graph move on that node is Evolve over the branch history
    g2 = graph(stagnant_branch() + [(20, 13, FUS, R, None, None)], [(13, 20, EdgeKind.FUSES), (2, 20, EdgeKind.FUSES)])
    exp2 = select_expansion(g2, s, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert (exp2.parent_id, exp2.operator) == (13, EVO)
    assert set(exp2.references) == {1, 11, 12, 14, 15, 16}
    # the tree policy never uses graph operators
    for seed in range(20):
        t = select_expansion(g, s.model_copy(update={"policy": "tree"}), progress=0.0, higher_is_better=True, rng=random.Random(seed))
        assert t.operator in (IMP, DBG, D)


def test_drafts_that_do_not_beat_the_first_are_not_stagnation():
    # five valid drafts, the first one the best: drafting ended, nothing has been improved yet
    drafts = [(1, 0, D, V, 0.80, 2.0), (2, 0, D, V, 0.78, 0.8), (3, 0, D, V, 0.70, 0.0), (4, 0, D, V, 0.75, 0.5), (5, 0, D, V, 0.79, 0.9)]
    assert not is_globally_stagnant(graph(drafts), M)
    for seed in range(10):
        exp = select_expansion(graph(drafts), M, progress=0.0, higher_is_better=True, rng=random.Random(seed))
        assert exp.operator is IMP, exp.reason
    # four improve steps without a new best are
    steps = [(11, 1, IMP, V, 0.79, 0.9), (12, 2, IMP, V, 0.77, 0.7), (13, 5, IMP, B, None, -1.0), (14, 4, IMP, V, 0.76, 0.6)]
    assert not is_globally_stagnant(graph(drafts + steps[:3]), M)
    assert is_globally_stagnant(graph(drafts + steps), M)
    exp = select_expansion(graph(drafts + steps), M, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert exp.operator is AGG and exp.references == (1, 5, 2, 14, 3)  # 14 beat its draft (4)


def test_global_stagnation_with_two_good_branches_aggregates_once():
    spec = stagnant_branch() + [(17, 2, IMP, V, 0.70, 0.1)]
    exp = select_expansion(graph(spec), M, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert exp.parent_id == 0 and exp.operator is AGG
    assert exp.references == (13, 2, 4)
    after = spec + [(30, 0, AGG, V, 0.70, 0.1)]
    again = select_expansion(graph(after), M, progress=0.0, higher_is_better=True, rng=random.Random(0))
    assert again.operator is not AGG  # not twice in one stagnation spell


def test_credit_reaches_fusion_sources():
    spec = stagnant_branch() + [(20, 13, FUS, V, 0.85, 2.0)]
    plain = tree_stats(graph(spec), credit_share=0.5)
    fused = tree_stats(graph(spec, [(13, 20, EdgeKind.FUSES), (2, 20, EdgeKind.FUSES)]), credit_share=0.5)
    # the other branch's best (2) and its draft ancestor chain get half a visit and half the reward
    assert fused[2].visits == plain[2].visits + 0.5
    assert fused[2].value == pytest.approx(plain[2].value + 1.0)
    # the primary path of the fusion node is credited once, not twice
    assert fused[13].visits == plain[13].visits and fused[1].visits == plain[1].visits
    assert fused[0].visits == plain[0].visits  # the root is on the fusion node's own path


def test_virtual_loss_sends_a_second_worker_to_another_branch():
    # two equal branches; a worker is already running a child of draft 1
    spec = [(1, 0, D, V, 0.80, 1.0), (2, 0, D, V, 0.80, 1.0), (3, 0, D, B, None, -1.0), (4, 0, D, B, None, -1.0), (5, 0, D, B, None, -1.0)]
    s = S.model_copy(update={"max_debug_depth": 0})
    g = graph(spec + [(6, 1, IMP, R, None, None)])
    for seed in range(10):
        exp = select_expansion(g, s, progress=0.0, higher_is_better=True, rng=random.Random(seed))
        assert exp.parent_id == 2
    # without the in-flight node the two branches tie and either may be chosen
    picks = {select_expansion(graph(spec), s, progress=0.0, higher_is_better=True, rng=random.Random(k)).parent_id for k in range(20)}
    assert picks == {1, 2}


def test_greedy_policy_is_aides():
    s = SearchSettings(policy="greedy")
    g = graph(five_drafts())
    picks = [select_expansion(g, s, progress=0.0, higher_is_better=True, rng=random.Random(k)) for k in range(200)]
    debug = [p for p in picks if p.operator is DBG]
    improve = [p for p in picks if p.operator is IMP]
    assert 70 <= len(debug) <= 130 and len(debug) + len(improve) == 200
    assert {p.parent_id for p in debug} <= {3, 7, 9}  # failed leaves within the debug depth
    assert {p.parent_id for p in improve} == {1}  # always the best node
    few = graph(HAND[:2])
    assert select_expansion(few, s, progress=0.0, higher_is_better=True, rng=random.Random(0)).operator is D


def test_exploit_never_picks_from_the_worse_half():
    # two valid drafts late in the budget (a slow, poor one among them): exploit improves the good one
    spec = [(1, 0, D, V, 0.90, 2.0), (2, 0, D, V, 0.30, 0.0)]
    picks = [select_expansion(graph(spec), S, progress=1.0, higher_is_better=True, rng=random.Random(k)) for k in range(100)]
    exploit = [p for p in picks if "exploit" in p.reason]
    assert exploit and {p.parent_id for p in exploit} == {1}


# ----------------------------------------------------------------- cost-aware selection


def _two_branches(runtime_a: float, runtime_b: float):
    """Two drafts with the same score and reward; branch A's candidates are slow."""
    nodes = [FrozenNode(id=0, seq=0, parent_id=None, operator=Operator.ROOT, state=NodeState.ROOT)]
    edges = []
    for i, (nid, rt) in enumerate(((1, runtime_a), (2, runtime_b)), start=1):
        nodes.append(FrozenNode(id=nid, seq=i, parent_id=0, operator=D, state=V, score=0.8, reward=1.0, runtime_s=rt))
        edges.append(FrozenEdge(src=0, dst=nid, kind=EdgeKind.DERIVES, operator=D))
    return build_graph(nodes, edges)


def test_cost_aware_uct_prefers_the_cheaper_of_two_equal_branches():
    g = _two_branches(runtime_a=40.0, runtime_b=5.0)
    cheap = SearchSettings(policy="tree", num_drafts=2, time_budget_s=300, cost_penalty_share=0.1)
    blind = cheap.model_copy(update={"cost_penalty_share": 0.0})
    picks = {select_expansion(g, cheap, progress=0.1, higher_is_better=True, rng=random.Random(k)).parent_id for k in range(20)}
    assert picks == {2}
    picks = {select_expansion(g, blind, progress=0.1, higher_is_better=True, rng=random.Random(k)).parent_id for k in range(20)}
    assert picks == {1, 2}  # without the cost term the tie is broken at random


def test_cost_term_is_runtime_in_units_of_the_budget_share():
    stats = tree_stats(_two_branches(runtime_a=30.0, runtime_b=3.0))
    root = stats[0]
    assert stats[1].mean_runtime == 30.0 and root.mean_runtime == pytest.approx(16.5)
    base = uct_value(stats[1], root, c=1.0)
    assert uct_value(stats[1], root, c=1.0, cost_scale_s=30.0) == pytest.approx(base - 1.0)


def test_derived_structures_follow_a_graph_that_gains_nodes():
    """Children and branch lists are cached on the graph; adding a node must refresh them."""
    from mcgs.graph import branch_node_ids, branch_of, children

    g = graph([(1, 0, D, V, 0.5, 2.0), (2, 1, IMP, V, 0.6, 2.0)])
    assert children(g, 1) == [2] and branch_node_ids(g, 1) == [1, 2]
    g.add_node(3, node=FrozenNode(id=3, seq=3, parent_id=2, operator=IMP, state=V, score=0.7, reward=2.0))
    g.add_edge(2, 3, kinds={EdgeKind.DERIVES})
    assert children(g, 2) == [3] and branch_of(g, 3) == 1 and branch_node_ids(g, 1) == [1, 2, 3]
    assert tree_stats(g)[1].visits == 3


def test_selectable_is_decided_on_demand_and_agrees_with_its_definition():
    """UCT descends only into subtrees that hold a node that can take a child. The on-demand,
    iterative check (it looks at the descent's children, not at every node) must agree with the
    definition on a random graph with failures, exhausted nodes and nodes in flight: a node is
    selectable iff it is finished (or the root) and it, or a selectable primary child, can be
    expanded. One chain is deeper than Python's recursion limit."""
    from mcgs.graph import children
    from mcgs.policy import _expansion_at, _Selectable

    rng = random.Random(7)
    spec = []
    for i in range(1, 600):
        parent = 0 if i <= 4 else rng.randint(1, i - 1)
        state = rng.choice([V, V, V, B, R])
        spec.append((i, parent, D if parent == 0 else (IMP if state is not B else DBG), state,
                     rng.random() if state is V else None, (rng.random() if state is V else -1.0) if state is not R else None))
    chain_parent = 1
    for i in range(600, 1900):  # a long chain of valid nodes below node 1
        spec.append((i, chain_parent, IMP, V, 0.5, 0.5))
        chain_parent = i
    g = graph(spec)
    s = SearchSettings(policy="tree", num_improve_children=1, num_debug_children=1, max_debug_depth=2)

    memo: dict[int, bool] = {}
    for v in sorted(g.nodes, key=lambda n: g.nodes[n]["node"].seq, reverse=True):  # children first
        fn = g.nodes[v]["node"]
        ok = fn.state.is_finished() or fn.state is NodeState.ROOT
        memo[v] = ok and (_expansion_at(g, v, s, True) is not None or any(memo[c] for c in children(g, v)))
    lazy = _Selectable(g, s, True)
    assert lazy(0) == memo[0]
    assert len(lazy.memo) < g.number_of_nodes() / 4  # the root's answer needed a small part of the graph
    assert all(lazy(v) == memo[v] for v in g.nodes)
