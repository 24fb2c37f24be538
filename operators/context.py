"""What every operator may read: the graph, the task, its profile and the settings."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import networkx as nx

from mcgs.coders import CoderRequest, config_key
from mcgs.graph import cache_entries, children, node, nodes_by_seq, primary_ancestors
from mcgs.node import FrozenNode, Operator
from mcgs.settings import SearchSettings
from mcgs.task import TaskSpec

if TYPE_CHECKING:
    from mcgs.branches import Expansion


#: ``g.graph`` key of :func:`tried_configs`'s cache (carried forward by :data:`mcgs.run_graph.CACHE_UPDATERS`)
TRIED_CACHE = "_mcgs_tried_configs"


def tried_configs(graph: nx.DiGraph) -> Mapping[str, int]:
    """:func:`~mcgs.coders.config_key` of every node of ``graph`` with a config -> the first
    such node's sequence number (ensemble nodes included; their configs never match a
    program's); read-only.

    Cached on the graph and kept up to date by :func:`mcgs.graph.update_graph` with
    :func:`update_tried` (:data:`mcgs.run_graph.CACHE_UPDATERS`), so a launch keys only the
    nodes added since the last one: keying 10 000 configs at every launch would take about 0.15 s."""
    entries = cache_entries(graph, TRIED_CACHE)
    if "keys" not in entries:
        keys: dict[str, int] = {}
        for n in nodes_by_seq(graph):
            key = config_key(n.config)
            if key is not None:
                keys.setdefault(key, n.seq)
        entries["keys"] = keys
    return MappingProxyType(entries["keys"])


def update_tried(g: nx.DiGraph, cache: dict, changes, new_edges) -> bool:
    """The :func:`mcgs.graph.update_graph` updater of :func:`tried_configs`'s cache: new nodes come in
    creation order, so the first node with a key stays its owner."""
    keys = cache["entries"].get("keys")
    if keys is None:
        return True
    for old, new in changes:
        if old is not None:
            if old.config != new.config:  # storage never changes a config; rebuild if it did
                return False
            continue
        key = config_key(new.config)
        if key is not None:
            keys.setdefault(key, new.seq)
    return True



@dataclasses.dataclass(frozen=True)
class OperatorContext:
    """Read-only context of one expansion.

    Attributes:
        graph: The search graph (rebuilt from storage).
        task: The task.
        profile: Its data profile.
        settings: Search settings.
        seed: Seed for the new node's program (run seed + node sequence number).
        seq: Sequence number the new node will get.
        experience: What earlier runs on similar data say (:mod:`mcgs.experience`), or None.
    """

    graph: nx.DiGraph
    task: TaskSpec
    profile: dict[str, Any]
    settings: SearchSettings
    seed: int
    seq: int | None = None
    experience: Any = None

    def node(self, node_id: int) -> FrozenNode:
        return node(self.graph, node_id)

    def siblings(self, parent_id: int) -> tuple[FrozenNode, ...]:
        """Existing primary children of ``parent_id``."""
        return tuple(node(self.graph, c) for c in children(self.graph, parent_id))

    def lineage(self, node_id: int) -> tuple[FrozenNode, ...]:
        """Primary ancestors of ``node_id`` that hold programs, nearest first."""
        return tuple(node(self.graph, a) for a in primary_ancestors(self.graph, node_id) if node(self.graph, a).code)

    def request(self, exp: "Expansion", operator: Operator, *, with_parent: bool = True) -> CoderRequest:
        """The coder request for expanding ``exp.parent_id`` with ``operator``.

        Args:
            exp: The policy's expansion (parent, tier, reason).
            operator: The operator asking.
            with_parent: Pass the parent node and its lineage (False for drafts: the parent
                is the root, which holds no program).
        """
        return CoderRequest(
            operator=operator,
            task=self.task,
            profile=self.profile,
            parent=self.node(exp.parent_id) if with_parent else None,
            siblings=self.siblings(exp.parent_id),
            lineage=self.lineage(exp.parent_id) if with_parent else (),
            tier=exp.tier,
            seed=self.seed,
            per_run_timeout_s=self.settings.node_limit_s,
            reason=exp.reason,
            references=tuple(self.node(r) for r in exp.references),
            node_seq=self.seq,
            tried=tried_configs(self.graph),
            experience=self.experience,
        )
