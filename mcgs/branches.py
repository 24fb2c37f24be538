"""Branches of the search graph and the expansions proposed on them: the queries an operator
asks to decide whether it applies (DESIGN §4).

A *branch* is a root-level node (a draft or an aggregate node) with its primary-parent
descendants. Everything here is a pure function of the graph; the answers that would cost a
walk of every node (each branch's best, the global ranking) are cached on the graph and kept
up to date by :func:`mcgs.graph.update_graph`.
"""

from __future__ import annotations

import bisect
import dataclasses

import networkx as nx

from mcgs.direction import best_first, better
from mcgs.graph import _derived, branch_node_ids, branch_of, cache_entries, children, newest_first, node, root_of, valid_nodes
from mcgs.node import FrozenNode, NodeState, Operator
from mcgs.settings import SearchSettings

__all__ = [
    "Expansion",
    "IMPROVE_TIERS",
    "GRAPH_OPERATORS",
    "live_children",
    "debug_depth",
    "branch_members",
    "branch_best",
    "ranked_search_nodes",
    "is_branch_stagnant",
    "is_globally_stagnant",
    "improve_tier",
    "good_branches",
    "StagnantBranch",
    "stagnant_branch_at",
]

IMPROVE_TIERS = ("params", "features", "strategy")
# Operators that merge or re-read other nodes; the tree policy never uses them.
GRAPH_OPERATORS = (Operator.EVOLVE, Operator.FUSION, Operator.AGGREGATE)


#: ``g.graph`` keys of this module's caches (carried forward by :data:`mcgs.run_graph.CACHE_UPDATERS`)
BRANCH_BEST_CACHE = "_mcgs_branch_best"
RANKING_CACHE = "_mcgs_ranking"


@dataclasses.dataclass(frozen=True)
class Expansion:
    """What to expand next: a primary parent and the operator that writes the child.

    Attributes:
        parent_id: Node to expand (the new node's primary parent).
        operator: DRAFT or AGGREGATE (parent = root), DEBUG (failed parent), IMPROVE, EVOLVE
            or FUSION (valid parent), ENSEMBLE (parent = root; built by the engine).
        tier: For IMPROVE, index into :data:`IMPROVE_TIERS` (0 params, 1 features, 2 strategy).
        reason: Short human-readable why, stored with the node's plan.
        references: Other nodes the operator reads: the fusion/aggregation inputs (stored as
            ``fuses`` edges) or the branch history Evolve learns from (``references`` edges).
    """

    parent_id: int
    operator: Operator
    tier: int = 0
    reason: str = ""
    references: tuple[int, ...] = ()


def live_children(g: nx.DiGraph, v: int) -> list[int]:
    """Primary children that count against child limits (interrupted ones do not)."""
    return [c for c in children(g, v) if node(g, c).state is not NodeState.INTERRUPTED]


def debug_depth(g: nx.DiGraph, v: int) -> int:
    """Number of consecutive DEBUG steps that led to node v."""
    depth = 0
    cur = v
    while cur is not None and node(g, cur).operator is Operator.DEBUG:
        depth += 1
        cur = node(g, cur).parent_id
    return depth


def _counts(n: FrozenNode | None) -> bool:
    """Whether a node takes part in the branch bests and the global ranking: valid at full
    fidelity (:mod:`mcgs.fidelity`: lower fidelities are compared among themselves only)."""
    return n is not None and n.is_valid and n.full_fidelity


def _better(a: FrozenNode, b: FrozenNode, higher_is_better: bool) -> bool:
    return better(a.score, b.score, higher_is_better)


def branch_members(g: nx.DiGraph, head: int) -> list[FrozenNode]:
    """Nodes of the branch headed by ``head`` (a draft or an aggregate node and its
    primary-parent descendants), in creation order."""
    return [node(g, v) for v in branch_node_ids(g, head)]


def branch_best(g: nx.DiGraph, head: int, higher_is_better: bool) -> tuple[FrozenNode | None, int]:
    """The branch's best full-fidelity valid node (earliest wins ties) and the number of such
    nodes of the branch created after it (its spent patience). Cached on the graph per branch and kept up
    to date by :func:`mcgs.graph.update_graph` (a new valid node that does not beat the best
    adds one to the count; one that does, or an older one, has the branch recounted)."""
    entries = cache_entries(g, BRANCH_BEST_CACHE)
    if (head, higher_is_better) in entries:
        return entries[head, higher_is_better]
    members = [m for m in branch_members(g, head) if _counts(m)]
    if not members:
        entries[head, higher_is_better] = (None, 0)
        return None, 0
    best = members[0]
    for m in members[1:]:
        if _better(m, best, higher_is_better):
            best = m
    entries[head, higher_is_better] = (best, sum(1 for m in members if m.seq > best.seq))
    return entries[head, higher_is_better]


def update_branch_best(g: nx.DiGraph, cache: dict, changes, new_edges) -> bool:
    """The :func:`mcgs.graph.update_graph` updater of :func:`branch_best`'s cache."""
    head_of = _derived(g)["head"]
    entries = cache["entries"]
    for old, new in changes:
        h = head_of.get(new.id)
        for hib in (True, False):
            if (h, hib) not in entries or _counts(new) == _counts(old):
                continue
            best, since = entries[h, hib]
            if _counts(old):  # a valid node changed (storage never does this)
                del entries[h, hib]
            elif best is not None and new.seq > best.seq and not _better(new, best, hib):
                entries[h, hib] = (best, since + 1)
            else:  # a new best, or a node older than the best: recount the branch
                del entries[h, hib]
    return True



def _rank_key(n: FrozenNode, higher_is_better: bool) -> tuple[float, int, int]:
    return (best_first(n.score, higher_is_better), n.seq, n.id)


def ranked_search_nodes(g: nx.DiGraph, higher_is_better: bool) -> list[tuple[float, int, int]]:
    """Valid full-fidelity search nodes (ensembles aside), best first (earliest wins ties), as
    ``(sort key, seq, node id)``. Cached on the graph and kept sorted by
    :func:`mcgs.graph.update_graph` (a new valid node is inserted by bisection), so the global
    top-K costs no sort of every node. The returned list is the cache: do not modify it."""
    entries = cache_entries(g, RANKING_CACHE)
    if higher_is_better not in entries:
        entries[higher_is_better] = sorted(
            _rank_key(n, higher_is_better) for n in valid_nodes(g) if n.operator is not Operator.ENSEMBLE  # full fidelity
        )
    return entries[higher_is_better]


def update_ranking(g: nx.DiGraph, cache: dict, changes, new_edges) -> bool:
    """The :func:`mcgs.graph.update_graph` updater of :func:`ranked_search_nodes`'s cache."""
    for old, new in changes:
        if _counts(old):
            return False  # a valid node changed (storage never does this): rank again
        if _counts(new) and new.operator is not Operator.ENSEMBLE:
            for hib, ranked in cache["entries"].items():
                bisect.insort(ranked, _rank_key(new, hib))
    return True



def is_branch_stagnant(g: nx.DiGraph, head: int, s: SearchSettings, higher_is_better: bool) -> bool:
    """True when the branch's last ``s.branch_stagnation`` successful nodes did not beat its
    best (DESIGN §4)."""
    best, since = branch_best(g, head, higher_is_better)
    return best is not None and since >= s.branch_stagnation


def is_globally_stagnant(g: nx.DiGraph, s: SearchSettings) -> bool:
    """True when the last ``s.global_stagnation`` finished refinement nodes all failed to set
    a new global best by more than the improvement threshold — i.e. none of them earned the
    reward's new-best bonus (DESIGN §4).

    Drafts and ensembles are not counted. A draft that does not beat the first one is
    exploration, not a failed attempt to improve. Counting drafts made the search "stagnant"
    as soon as drafting ended, in 9 of the 12 MCGS runs of the 2026-12-01 ablation: Aggregate
    then merged five unimproved drafts before any branch had had an Improve step.
    """
    done = []  # the last global_stagnation finished refinement nodes, newest first
    for n in newest_first(g):
        if n.reward is not None and n.operator not in (Operator.ENSEMBLE, Operator.DRAFT):
            done.append(n)
            if len(done) == s.global_stagnation:
                break
    if len(done) < s.global_stagnation:
        return False
    return all(n.reward < 1.0 for n in done)


def improve_tier(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> int:
    """Improve tier of a node's branch: escalate with the branch's patience.

    Counts the valid nodes in v's branch created after the branch's best; 0 while that count
    is below ``branch_patience`` (parameter changes), 1 below twice the patience (feature
    engineering), else 2 (strategy changes) — the MLEvolve tiers.
    """
    head = branch_of(g, v)
    if head is None:
        return 0
    _, since = branch_best(g, head, higher_is_better)
    return min(since // s.branch_patience, len(IMPROVE_TIERS) - 1)


def good_branches(g: nx.DiGraph, higher_is_better: bool) -> list[FrozenNode]:
    """Best valid node of every branch that has one, best first."""
    root = root_of(g)
    bests = []
    for head in children(g, root):
        if node(g, head).operator is Operator.ENSEMBLE:
            continue
        best, _ = branch_best(g, head, higher_is_better)
        if best is not None:
            bests.append(best)
    return sorted(bests, key=lambda n: (best_first(n.score, higher_is_better), n.seq))



@dataclasses.dataclass(frozen=True)
class StagnantBranch:
    """A stagnant branch whose best node may still take a graph child (Evolve or Fusion).

    Attributes:
        head: The branch's head node id.
        best: Its best valid node (the one Evolve and Fusion expand).
        since: Valid nodes of the branch created after the best.
        n_fusion: The best node's live Fusion children.
        n_evolve: Its live Evolve children.
    """

    head: int
    best: FrozenNode
    since: int
    n_fusion: int
    n_evolve: int


def stagnant_branch_at(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> StagnantBranch | None:
    """The branch of the valid search node ``v`` when it is stagnant (its last
    ``s.branch_stagnation`` valid nodes did not beat its best) and its best node has fewer than
    ``s.graph_children`` live Evolve and Fusion children; else None (DESIGN §4)."""
    fn = node(g, v)
    if fn.state is not NodeState.VALID or fn.operator is Operator.ENSEMBLE:
        return None
    head = branch_of(g, v)
    if head is None or s.graph_children <= 0:
        return None
    best, since = branch_best(g, head, higher_is_better)
    if best is None or since < s.branch_stagnation:
        return None
    kids = [node(g, c) for c in live_children(g, best.id)]
    graph_kids = [k for k in kids if k.operator in (Operator.EVOLVE, Operator.FUSION)]
    if len(graph_kids) >= s.graph_children:
        return None
    n_fusion = sum(k.operator is Operator.FUSION for k in graph_kids)
    return StagnantBranch(head, best, since, n_fusion, len(graph_kids) - n_fusion)
