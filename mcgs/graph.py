"""The search graph on :class:`networkx.DiGraph`, rebuilt from storage, and free functions
over it (lineage, branches, best nodes), in the style of networkx's own algorithms.

Node attribute ``"node"`` holds the :class:`~mcgs.node.FrozenNode`; edge attribute ``"kind"``
holds the :class:`~mcgs.node.EdgeKind` (a pair of nodes may be joined by one edge of each kind,
so parallel kinds are merged into the attribute ``"kinds"``).

Structures every selection needs (primary children, branch heads, branch members) are derived
once per graph in one pass and kept in ``g.graph``: selection stays linear in the number of
nodes instead of walking a branch for each of its nodes. The engine keeps one graph per worker
thread and brings it up to date with :func:`update_graph`, which applies the nodes and edges
storage added or changed since the last step in place and updates the derived structures, and
every cache whose updater the caller passes (:data:`mcgs.run_graph.CACHE_UPDATERS`: the branch
bests, the ranking, the visit statistics, the tried configs), by that change alone: a step costs
time in proportion to what changed, not to the size of the graph (``experiments/engine_cost.py``).
Caches live in ``g.graph`` (:func:`cache_entries`) and are keyed by the node count and the update
count, so a cache no updater carried forward, or a graph changed any other way (``g.add_node``),
is rebuilt on its next use. This module holds no state of its own.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Iterator, Mapping

import networkx as nx

from mcgs.direction import better
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState

__all__ = [
    "build_graph",
    "update_graph",
    "cache_entries",
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


def cache_entries(g: nx.DiGraph, name: str) -> dict:
    """The entries of the cache ``name`` on ``g.graph``, emptied first when they describe
    another state of the graph (:func:`cache_key`); :func:`update_graph` carries a cache forward
    when given its updater."""
    cache = g.graph.get(name)
    if cache is None or cache["key"] != cache_key(g):
        cache = g.graph[name] = {"key": cache_key(g), "entries": {}}
    return cache["entries"]


def cache_key(g: nx.DiGraph) -> tuple[int, int]:
    """What a cache on ``g.graph`` is valid for: ``(node count, in-place updates)``; O(1)
    (networkx counts edges by summing degrees, so edges are not part of it)."""
    return g.number_of_nodes(), g.graph.get("_mcgs_updates", 0)


def update_graph(g: nx.DiGraph, nodes: Iterable[FrozenNode], edges: Iterable[FrozenEdge],
                 caches: Mapping[str, Callable] | None = None) -> list[FrozenEdge] | None:
    """Apply new and changed nodes and new edges to ``g`` in place (the engine's per-step update).

    Args:
        g: A graph from :func:`build_graph` (or earlier updates).
        nodes: Nodes that are new or changed since ``g`` was last brought up to date (when a
            node comes more than once, its last version counts).
        edges: Edges that are new since then (an edge already in ``g`` is ignored).
        caches: ``g.graph`` key -> ``updater(g, cache, changes, new_edges)`` of each cache to
            carry forward (:data:`mcgs.run_graph.CACHE_UPDATERS`). An updater is called after
            the graph and its derived structures took the change: ``changes`` lists ``(old,
            new)`` FrozenNode pairs in creation order (``old`` None for a new node),
            ``new_edges`` the edges added; it updates ``cache`` in place and returns True, or
            False to have the cache dropped. Other caches are rebuilt on their next use.

    Returns:
        The edges that could not be added yet because an end node is not in the graph (the
        caller passes them again with the next change), or None when the change cannot be
        applied in place: a new node older (by ``seq``) than the newest node of the graph, or a
        changed node whose primary parent changed. The caller then rebuilds the graph.
    """
    key = cache_key(g)
    d = g.graph.get("_mcgs_derived")
    if d is not None and d["key"] != key:  # the graph was changed some other way
        d = None
    nodes = sorted({n.id: n for n in nodes}.values(), key=lambda n: n.seq)  # the last version of each node
    # the derived structures append new nodes: they must be newer than every node they hold
    last_seq = None if d is None else d["nodes"][d["by_seq"][-1]].seq if d["by_seq"] else -1
    changes: list[tuple[FrozenNode | None, FrozenNode]] = []
    for n in nodes:
        old = g.nodes[n.id]["node"] if n.id in g else None
        if old is None:
            if last_seq is not None:
                if n.seq <= last_seq:
                    return None
                last_seq = n.seq
        elif old.parent_id != n.parent_id or old.seq != n.seq:
            return None
        if old is not n:
            changes.append((old, n))
    pending, added = [], []
    for _, n in changes:
        g.add_node(n.id, node=n)
    for e in edges:
        if e.src not in g or e.dst not in g:
            pending.append(e)
            continue
        if g.has_edge(e.src, e.dst):
            kinds = g.edges[e.src, e.dst]["kinds"]
            if e.kind in kinds:
                continue
            kinds.add(e.kind)
        else:
            g.add_edge(e.src, e.dst, kinds={e.kind})
        added.append(e)
    if not changes and not added:
        return pending
    g.graph["_mcgs_updates"] = key[1] + 1
    new_key = cache_key(g)
    if d is not None:
        _update_derived(d, changes, added)
        d["key"] = new_key
    for name, updater in (caches or {}).items():
        cache = g.graph.get(name)
        if cache is None:
            continue
        if cache.get("key") != key or d is None or not updater(g, cache, changes, added):
            del g.graph[name]
        else:
            cache["key"] = new_key
    return pending


def _update_derived(d: dict, changes: list[tuple[FrozenNode | None, FrozenNode]], edges: list[FrozenEdge]) -> None:
    """Bring :func:`_derived`'s structures up to date with a change (nodes in creation order,
    every new node newer than the graph's nodes: :func:`update_graph` checks)."""
    fnodes, kids, head, members = d["nodes"], d["children"], d["head"], d["members"]
    for old, n in changes:
        fnodes[n.id] = n
        if old is not None:
            continue
        d["by_seq"].append(n.id)
        kids.setdefault(n.id, [])
        if n.state is NodeState.ROOT and d["root"] is None:
            d["root"] = n.id
        p = n.parent_id
        h = None if p is None else (n.id if p == d["root"] else head.get(p))
        head[n.id] = h
        if h is not None:
            members.setdefault(h, []).append(n.id)
    for e in edges:
        if e.kind is EdgeKind.DERIVES:
            lst = kids[e.src]
            if e.dst not in lst:
                lst.append(e.dst)
                if len(lst) > 1 and fnodes[lst[-2]].seq > fnodes[e.dst].seq:
                    lst.sort(key=lambda c: fnodes[c].seq)


def node(g: nx.DiGraph, node_id: int) -> FrozenNode:
    return g.nodes[node_id]["node"]


def _derived(g: nx.DiGraph) -> dict:
    """Primary children (by seq), branch head of every node, branch members (by seq) and the
    nodes in creation order, computed in one pass over plain dicts and cached on the graph
    (kept up to date by :func:`update_graph`)."""
    key = cache_key(g)
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


def newest_first(g: nx.DiGraph) -> Iterator[FrozenNode]:
    """Every node, newest (highest seq) first, lazily: readers of the last few nodes stop early."""
    d = _derived(g)
    fnodes = d["nodes"]
    return (fnodes[n] for n in reversed(d["by_seq"]))


def newest_node(g: nx.DiGraph) -> FrozenNode:
    """The node created last (highest seq).

    Raises:
        StopIteration: the graph is empty.
    """
    return next(newest_first(g))


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


def valid_nodes(g: nx.DiGraph, fidelity: float = 1.0) -> list[FrozenNode]:
    """The VALID nodes with a score of one fidelity (full by default: the nodes the final choice
    and ensembles compare; :mod:`mcgs.fidelity`), in creation order."""
    return [n for n in nodes_by_seq(g) if n.is_valid and math.isclose(n.fidelity, fidelity)]


def best_node(g: nx.DiGraph, higher_is_better: bool) -> FrozenNode | None:
    """The full-fidelity valid node with the best score (earliest wins ties), or None."""
    best = None
    for n in valid_nodes(g):
        if best is None or better(n.score, best.score, higher_is_better):
            best = n
    return best
