"""Hand-built search graphs for the policy's and the operators' tests."""

from __future__ import annotations

from mcgs.graph import build_graph
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState, Operator

V, B = NodeState.VALID, NodeState.BUGGY
D, IMP = Operator.DRAFT, Operator.IMPROVE


def graph(spec, extra_edges=()):
    """spec: list of (id, parent, operator, state, score, reward); extra_edges: (src, dst, kind)."""
    nodes = [FrozenNode(id=0, seq=0, parent_id=None, operator=Operator.ROOT, state=NodeState.ROOT)]
    edges = []
    ops = {}
    for i, (nid, parent, op, state, score, reward) in enumerate(spec, start=1):
        nodes.append(FrozenNode(id=nid, seq=i, parent_id=parent, operator=op, state=state, score=score, reward=reward))
        edges.append(FrozenEdge(src=parent, dst=nid, kind=EdgeKind.DERIVES, operator=op))
        ops[nid] = op
    edges += [FrozenEdge(src=a, dst=b, kind=k, operator=ops[b]) for a, b, k in extra_edges]
    return build_graph(nodes, edges)


def stagnant_branch():
    """Branch 1 (best 0.80 at its draft) followed by three improve steps that did not beat it;
    branch 2 a good draft (0.78); branch 3 a failed draft; drafts complete."""
    return [
        (1, 0, D, V, 0.80, 2.0),
        (2, 0, D, V, 0.78, 0.8),
        (3, 0, D, B, None, -1.0),
        (4, 0, D, V, 0.60, 0.0),
        (5, 0, D, B, None, -1.0),
        (11, 1, IMP, V, 0.79, 0.9),
        (12, 1, IMP, V, 0.795, 0.95),
        (13, 11, IMP, V, 0.81, 2.0),  # a new best: branch 1's best is now node 13
        (14, 13, IMP, V, 0.80, 0.9),
        (15, 13, IMP, V, 0.805, 0.95),
        (16, 14, IMP, V, 0.79, 0.8),
    ]
