"""What every operator may read: the graph, the task, its profile and the settings."""

from __future__ import annotations

import dataclasses
from typing import Any

import networkx as nx

from mcgs.graph import children, node, primary_ancestors
from mcgs.node import FrozenNode
from mcgs.settings import SearchSettings
from mcgs.task import TaskSpec


@dataclasses.dataclass(frozen=True)
class OperatorContext:
    """Read-only context of one expansion.

    Attributes:
        graph: The search graph (rebuilt from storage).
        task: The task.
        profile: Its data profile.
        settings: Search settings.
        seed: Seed for the new node's program (run seed + node sequence number).
    """

    graph: nx.DiGraph
    task: TaskSpec
    profile: dict[str, Any]
    settings: SearchSettings
    seed: int

    def node(self, node_id: int) -> FrozenNode:
        return node(self.graph, node_id)

    def siblings(self, parent_id: int) -> tuple[FrozenNode, ...]:
        """Existing primary children of ``parent_id``."""
        return tuple(node(self.graph, c) for c in children(self.graph, parent_id))

    def lineage(self, node_id: int) -> tuple[FrozenNode, ...]:
        """Primary ancestors of ``node_id`` that hold programs, nearest first."""
        return tuple(node(self.graph, a) for a in primary_ancestors(self.graph, node_id) if node(self.graph, a).code)
