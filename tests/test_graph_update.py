"""The engine's graph is updated in place step by step (mcgs.graph.update_graph); whatever the
order in which nodes appear, finish and gain edges, it must agree with a graph built whole from
the same nodes and edges: derived structures, branch bests, the ranking of valid nodes, visit
statistics and selections (every policy)."""

from __future__ import annotations

import random

import pytest

from mcgs.graph import _derived, build_graph, update_graph
from mcgs.run_graph import CACHE_UPDATERS
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState, Operator
from mcgs.branches import branch_best, ranked_search_nodes
from mcgs.policy import select_expansion, tree_stats
from mcgs.settings import SearchSettings


def _events(seed: int, n: int):
    """A random run told as storage refreshes: each batch holds the nodes that are new or changed
    and the edges that are new. Nodes are added PENDING and finish later, out of order (two
    workers); a Fusion node's ``fuses`` edges, or a node's own ``derives`` edge, sometimes arrive
    one refresh after the node."""
    rng = random.Random(seed)
    root = FrozenNode(id=1, seq=0, parent_id=None, operator=Operator.ROOT, state=NodeState.ROOT)
    nodes = {1: root}
    batches = [([root], [])]
    in_flight: list[int] = []
    late_edges: list[FrozenEdge] = []
    for seq in range(1, n + 1):
        changed, edges = [], late_edges
        late_edges = []
        nid = seq + 1
        parent = 1 if seq <= 4 or rng.random() < 0.08 else rng.choice([i for i in nodes if i != 1])
        op = Operator.DRAFT if parent == 1 else rng.choice([Operator.IMPROVE, Operator.IMPROVE, Operator.DEBUG, Operator.FUSION])
        fn = FrozenNode(id=nid, seq=seq, parent_id=parent, operator=op, state=NodeState.PENDING)
        nodes[nid] = fn
        changed.append(fn)
        own = [FrozenEdge(src=parent, dst=nid, kind=EdgeKind.DERIVES, operator=op)]
        if op is Operator.FUSION:
            for src in rng.sample(sorted(i for i in nodes if i not in (1, nid, parent)), k=min(2, len(nodes) - 3)):
                own.append(FrozenEdge(src=src, dst=nid, kind=rng.choice([EdgeKind.FUSES, EdgeKind.REFERENCES]), operator=op))
        (late_edges if rng.random() < 0.15 else edges).extend(own)
        in_flight.append(nid)
        while in_flight and (len(in_flight) > 2 or rng.random() < 0.4):
            done = in_flight.pop(rng.randrange(len(in_flight)))
            ok = rng.random() < 0.8
            score = round(rng.random(), 2) if ok else None  # rounded: ties happen
            finished = FrozenNode(
                id=done, seq=nodes[done].seq, parent_id=nodes[done].parent_id, operator=nodes[done].operator,
                state=NodeState.VALID if ok else NodeState.BUGGY, score=score,
                reward=(score + (rng.random() < 0.1)) if ok else -1.0, runtime_s=rng.uniform(1, 30),
            )
            nodes[done] = finished
            changed.append(finished)
        batches.append((changed, edges))
    batches.append(([], late_edges))
    return batches


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_updated_in_place_agrees_with_a_graph_built_whole(seed):
    mcgs, tree, greedy = (SearchSettings(policy=p) for p in ("mcgs", "tree", "greedy"))
    batches = _events(seed, 160)
    g = build_graph(*batches[0])
    all_nodes: dict[int, FrozenNode] = {n.id: n for n in batches[0][0]}
    all_edges: list[FrozenEdge] = []
    pending: list[FrozenEdge] = []
    checked = 0
    for step, (changed, edges) in enumerate(batches[1:]):
        # use every cache before the update, so the update has to carry it forward
        tree_stats(g, -1.0, 0.3)
        tree_stats(g, -1.0, 0.0)
        ranked_search_nodes(g, True)
        ranked_search_nodes(g, False)
        for head in _derived(g)["members"]:
            branch_best(g, head, True)
            branch_best(g, head, False)
        pending = update_graph(g, changed, pending + edges, CACHE_UPDATERS)
        assert pending is not None
        all_nodes.update({n.id: n for n in changed})
        all_edges += edges
        ids = set(all_nodes)
        fresh = build_graph(sorted(all_nodes.values(), key=lambda n: n.seq), [e for e in all_edges if e.src in ids and e.dst in ids])
        a, b = _derived(g), _derived(fresh)
        for key in ("children", "head", "members", "root", "by_seq", "nodes"):
            assert a[key] == b[key], (step, key)
        assert {(u, v): k for u, v, k in g.edges(data="kinds")} == {(u, v): k for u, v, k in fresh.edges(data="kinds")}
        for head in b["members"]:
            for hib in (True, False):
                assert branch_best(g, head, hib) == branch_best(fresh, head, hib), (step, head, hib)
        for hib in (True, False):
            assert ranked_search_nodes(g, hib) == ranked_search_nodes(fresh, hib), (step, hib)
        for share in (0.3, 0.0):
            got, want = tree_stats(g, -1.0, share), tree_stats(fresh, -1.0, share)
            assert got.keys() == want.keys()
            for v in want:
                assert (got[v].visits, got[v].value, got[v].runtime_sum, got[v].runtime_n) == pytest.approx(
                    (want[v].visits, want[v].value, want[v].runtime_sum, want[v].runtime_n), abs=1e-9), (step, share, v)
        if step % 10 == 0:
            for s in (mcgs, tree, greedy):
                for k in range(3):
                    progress = 0.3 + 0.2 * k
                    assert select_expansion(g, s, progress=progress, higher_is_better=True, rng=random.Random(k)) == \
                        select_expansion(fresh, s, progress=progress, higher_is_better=True, rng=random.Random(k))
        checked += 1
    assert checked == len(batches) - 1 and not pending
    # the scenario exercised what it is meant to: credit edges, out-of-order finishes, late edges
    assert any(EdgeKind.FUSES in k or EdgeKind.REFERENCES in k for *_, k in g.edges(data="kinds"))
    assert sum(1 for n in all_nodes.values() if n.state is NodeState.VALID) > 80


def test_update_refuses_a_node_older_than_the_graph_and_a_moved_parent():
    """Changes the derived structures cannot take in place make update_graph return None (the
    engine then builds the graph whole)."""
    root = FrozenNode(id=1, seq=0, parent_id=None, operator=Operator.ROOT, state=NodeState.ROOT)
    a = FrozenNode(id=2, seq=2, parent_id=1, operator=Operator.DRAFT, state=NodeState.PENDING)
    g = build_graph([root, a], [FrozenEdge(src=1, dst=2, kind=EdgeKind.DERIVES, operator=Operator.DRAFT)])
    _derived(g)
    older = FrozenNode(id=3, seq=1, parent_id=1, operator=Operator.DRAFT, state=NodeState.PENDING)
    assert update_graph(g, [older], []) is None
    moved = FrozenNode(id=2, seq=2, parent_id=3, operator=Operator.DRAFT, state=NodeState.PENDING)
    assert update_graph(build_graph([root, a], []), [moved], []) is None
    # an edge whose node is not there yet is handed back, and taken once the node arrives
    newer = FrozenNode(id=4, seq=3, parent_id=2, operator=Operator.IMPROVE, state=NodeState.PENDING)
    edge = FrozenEdge(src=2, dst=4, kind=EdgeKind.DERIVES, operator=Operator.IMPROVE)
    assert update_graph(g, [], [edge]) == [edge]
    assert update_graph(g, [newer], [edge]) == []
    assert _derived(g)["children"][2] == [4] and _derived(g)["head"][4] == 2


def test_a_step_carries_the_caches_it_is_given_and_rebuilds_the_others():
    """The graph module keeps no registry: the caller names the caches a step carries forward
    (the engine passes mcgs.run_graph.CACHE_UPDATERS); any other cache is rebuilt on its next
    use, with the same answer."""
    from mcgs.graph import cache_key

    batches = _events(0, 40)
    g, h = build_graph(*batches[0]), build_graph(*batches[0])
    pending_g: list[FrozenEdge] = []
    pending_h: list[FrozenEdge] = []
    for changed, edges in batches[1:]:
        pending_g = update_graph(g, changed, pending_g + edges)
        pending_h = update_graph(h, changed, pending_h + edges, CACHE_UPDATERS)
    ranked = ranked_search_nodes(h, True)
    stats = tree_stats(h, -1.0, 0.3)
    more = FrozenNode(id=999, seq=999, parent_id=ranked[0][2], operator=Operator.IMPROVE, state=NodeState.VALID, score=2.0, reward=2.0)
    edge = FrozenEdge(src=ranked[0][2], dst=999, kind=EdgeKind.DERIVES, operator=Operator.IMPROVE)
    update_graph(g, [more], [edge])
    update_graph(h, [more], [edge], CACHE_UPDATERS)
    carried = h.graph["_mcgs_ranking"]
    assert carried["key"] == cache_key(h) and ranked_search_nodes(h, True) is ranked  # updated in place
    assert ranked_search_nodes(h, True)[0][2] == 999 and tree_stats(h, -1.0, 0.3) is stats
    assert ranked_search_nodes(g, True) == ranked_search_nodes(h, True)  # g's were rebuilt, same answer
    assert {v: s.visits for v, s in tree_stats(g, -1.0, 0.3).items()} == {v: s.visits for v, s in stats.items()}
