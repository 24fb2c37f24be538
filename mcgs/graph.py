"""The search graph on :class:`networkx.DiGraph`, rebuilt from storage, and free functions
over it (lineage, branches, best nodes), in the style of networkx's own algorithms.

Node attribute ``"node"`` holds the :class:`~mcgs.node.FrozenNode`; edge attribute ``"kind"``
holds the :class:`~mcgs.node.EdgeKind` (a pair of nodes may be joined by one edge of each kind,
so parallel kinds are merged into the attribute ``"kinds"``).

Structures every selection needs (primary children, branch heads, branch members) are derived
once per graph in one pass and kept in ``g.graph`` (keyed by the node count, so a graph that
gains nodes gets them rebuilt; graphs are built whole from storage and edges never come
without their node): selection stays linear in the number of nodes instead of walking a
branch for each of its nodes.
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
    "branch_node_ids",
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


def _derived(g: nx.DiGraph) -> dict:
    """Primary children (by seq), branch head of every node, branch members (by seq) and the
    nodes in creation order, computed in one pass over plain dicts and cached on the graph."""
    key = g.number_of_nodes()  # O(1); networkx counts edges by summing degrees
    d = g.graph.get("_mcgs_derived")
    if d is not None and d["key"] == key:
        return d
    fnodes: dict[int, FrozenNode] = dict(g.nodes(data="node"))
    by_seq = sorted(fnodes, key=lambda n: fnodes[n].seq)
    kids: dict[int, list[int]] = {n: [] for n in by_seq}
    for a, b, kinds in g.edges(data="kinds"):
        if EdgeKind.DERIVES in kinds:
            kids[a].append(b)
    for lst in kids.values():
        if len(lst) > 1:
            lst.sort(key=lambda n: fnodes[n].seq)
    root = next((n for n in by_seq if fnodes[n].state is NodeState.ROOT), None)
    head: dict[int, int | None] = {}
    members: dict[int, list[int]] = {}
    for n in by_seq:  # parents are created before their children
        p = fnodes[n].parent_id
        h = None if p is None else (n if p == root else head.get(p))
        head[n] = h
        if h is not None:
            members.setdefault(h, []).append(n)
    d = {"key": key, "children": kids, "head": head, "members": members, "root": root, "nodes": fnodes, "by_seq": by_seq}
    g.graph["_mcgs_derived"] = d
    return d


def nodes_by_seq(g: nx.DiGraph) -> list[FrozenNode]:
    """Every node, in creation order (cached with the graph's derived structure)."""
    d = _derived(g)
    return [d["nodes"][n] for n in d["by_seq"]]


def root_of(g: nx.DiGraph) -> int:
    """Id of the root node (state ROOT)."""
    root = _derived(g)["root"]
    if root is not None:
        return root
    for n, data in g.nodes(data=True):
        if data["node"].state is NodeState.ROOT:
            return n
    raise ValueError("graph has no root node")  # pragma: no cover - every stored run has one


def children(g: nx.DiGraph, node_id: int, kind: EdgeKind = EdgeKind.DERIVES) -> list[int]:
    """Successors joined by an edge of ``kind`` (primary children by default), in creation order."""
    if kind is EdgeKind.DERIVES:
        return list(_derived(g)["children"][node_id])
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
    return _derived(g)["head"].get(node_id)


def branch_node_ids(g: nx.DiGraph, head: int) -> list[int]:
    """Ids of the branch headed by ``head`` (itself and its primary descendants), by seq."""
    return list(_derived(g)["members"].get(head, [head]))


def valid_nodes(g: nx.DiGraph) -> list[FrozenNode]:
    """All VALID nodes with a score, in creation order."""
    return [n for n in nodes_by_seq(g) if n.is_valid]


def best_node(g: nx.DiGraph, higher_is_better: bool) -> FrozenNode | None:
    """The valid node with the best score (earliest wins ties), or None."""
    best = None
    for n in valid_nodes(g):
        if best is None or (n.score > best.score if higher_is_better else n.score < best.score):
            best = n
    return best
