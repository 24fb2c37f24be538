"""The search graph on :class:`networkx.DiGraph`, rebuilt from storage, and free functions
over it (lineage, branches, best nodes), in the style of networkx's own algorithms.

Node attribute ``"node"`` holds the :class:`~mcgs.node.FrozenNode`; edge attribute ``"kind"``
holds the :class:`~mcgs.node.EdgeKind` (a pair of nodes may be joined by one edge of each kind,
so parallel kinds are merged into the attribute ``"kinds"``).
"""

from __future__ import annotations

from typing import Iterable

import networkx as nx

from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState

__all__ = [
    "build_graph",
    "root_of",
    "children",
    "primary_ancestors",
    "branch_of",
    "valid_nodes",
    "best_node",
]


def build_graph(nodes: Iterable[FrozenNode], edges: Iterable[FrozenEdge]) -> nx.DiGraph:
    """Build the graph from stored nodes and edges (storage is the source of truth)."""
    g = nx.DiGraph()
    for n in nodes:
        g.add_node(n.id, node=n)
    for e in edges:
        if g.has_edge(e.src, e.dst):
            g.edges[e.src, e.dst]["kinds"].add(e.kind)
        else:
            g.add_edge(e.src, e.dst, kinds={e.kind})
    return g


def node(g: nx.DiGraph, node_id: int) -> FrozenNode:
    return g.nodes[node_id]["node"]


def root_of(g: nx.DiGraph) -> int:
    """Id of the root node (state ROOT)."""
    for n, data in g.nodes(data=True):
        if data["node"].state is NodeState.ROOT:
            return n
    raise ValueError("graph has no root node")


def children(g: nx.DiGraph, node_id: int, kind: EdgeKind = EdgeKind.DERIVES) -> list[int]:
    """Successors joined by an edge of ``kind`` (primary children by default), in creation order."""
    out = [c for c in g.successors(node_id) if kind in g.edges[node_id, c]["kinds"]]
    return sorted(out, key=lambda c: g.nodes[c]["node"].seq)


def primary_parent(g: nx.DiGraph, node_id: int) -> int | None:
    return g.nodes[node_id]["node"].parent_id


def primary_ancestors(g: nx.DiGraph, node_id: int) -> list[int]:
    """Primary-parent chain from the node's parent up to the root, nearest first."""
    out = []
    p = primary_parent(g, node_id)
    while p is not None:
        out.append(p)
        p = primary_parent(g, p)
    return out


def branch_of(g: nx.DiGraph, node_id: int) -> int | None:
    """The draft that heads the node's branch (the ancestor whose parent is the root)."""
    chain = [node_id, *primary_ancestors(g, node_id)]
    return chain[-2] if len(chain) >= 2 else None


def valid_nodes(g: nx.DiGraph) -> list[FrozenNode]:
    """All VALID nodes with a score, in creation order."""
    ns = [d["node"] for _, d in g.nodes(data=True) if d["node"].is_valid]
    return sorted(ns, key=lambda n: n.seq)


def best_node(g: nx.DiGraph, higher_is_better: bool) -> FrozenNode | None:
    """The valid node with the best score (earliest wins ties), or None."""
    best = None
    for n in valid_nodes(g):
        if best is None or (n.score > best.score if higher_is_better else n.score < best.score):
            best = n
    return best
