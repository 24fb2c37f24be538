"""The search graph of a live run, kept up to date from storage in place.

Storage is the single source of truth; the engine's selection reads a networkx graph built from
it. Rebuilding that graph before every decision would cost in proportion to the run's size, so
:class:`LiveGraph` keeps one graph per thread (worker threads select while others add nodes) and
applies only what storage added or changed since that thread's last read
(:class:`mcgs.storage.RunView` finds the changes; :func:`mcgs.graph.update_graph` applies them
and carries the caches of :data:`CACHE_UPDATERS` forward). This is the one object that holds
incremental graph state; the graph functions it calls are pure.
"""

from __future__ import annotations

import threading

import networkx as nx

from mcgs import branches, policy
from mcgs.graph import build_graph, update_graph
from mcgs.node import FrozenNode
from mcgs.operators import context

__all__ = ["LiveGraph", "CACHE_UPDATERS"]

#: The caches on a search graph that a step carries forward instead of rebuilding, by their
#: ``g.graph`` key: each branch's best (:func:`mcgs.branches.branch_best`), the ranking of valid
#: nodes (:func:`mcgs.branches.ranked_search_nodes`), the visit statistics
#: (:func:`mcgs.policy.tree_stats`) and the configs tried (:func:`mcgs.operators.context.tried_configs`).
CACHE_UPDATERS = {
    branches.BRANCH_BEST_CACHE: branches.update_branch_best,
    branches.RANKING_CACHE: branches.update_ranking,
    policy.TREE_STATS_CACHE: policy.update_tree_stats,
    context.TRIED_CACHE: context.update_tried,
}


class LiveGraph:
    """A run's nodes and graph as storage holds them now.

    Args:
        storage: Returns the run's storage now (a caller may swap it).
        run_id: The run's id.
    """

    def __init__(self, storage, run_id: int):
        self._storage, self.run_id = storage, run_id
        self._view = None  # storage.RunView of this run, created on first use
        self._local = threading.local()  # each thread's graph and how far it is up to date

    def view(self):
        """The storage view of the run (:class:`mcgs.storage.RunView`), made anew when the
        storage changed."""
        storage = self._storage()
        view = self._view
        if view is None or view.storage is not storage or view.run_id != self.run_id:
            view = self._view = storage.run_view(self.run_id)
        return view

    def nodes(self) -> list[FrozenNode]:
        """All nodes of the run, in creation order, as storage holds them now."""
        return self.view().nodes()

    def graph(self) -> nx.DiGraph:
        """The search graph built from storage alone, brought up to date in place for this
        thread (built whole on its first call and after the storage view read everything again).
        Callers must not modify it, and should not hold it across a call that may change
        storage if they need the older state."""
        view = self.view()
        with view.lock:
            view.refresh()
            cached = getattr(self._local, "entry", None)
            if cached is not None and cached["view"] is view and cached["epoch"] == view.epoch:
                if cached["version"] == view.version:
                    return cached["graph"]
                nodes, edges = view.changes_since(cached["version"], cached["n_edges"])
                pending = update_graph(cached["graph"], nodes, cached["pending"] + edges, CACHE_UPDATERS)
                if pending is not None:
                    cached.update(version=view.version, n_edges=view.edge_count, pending=pending)
                    return cached["graph"]
            nodes = view.nodes()
            ids = {n.id for n in nodes}
            edges = view.edges()
            # an edge whose node committed after the nodes were read waits for the next refresh
            g = build_graph(nodes, [e for e in edges if e.src in ids and e.dst in ids])
            pending = [e for e in edges if e.src not in ids or e.dst not in ids]
            self._local.entry = {"view": view, "epoch": view.epoch, "version": view.version, "n_edges": view.edge_count,
                                 "pending": pending, "graph": g}
            return g
