"""Selection, operator choice, reward and backpropagation (DESIGN §4).

Everything here is a pure function of the graph (rebuilt from storage), the settings and the
fraction of the budget spent, so a resumed run makes the same kind of decisions as one that
never stopped.

* **Reward** (one definition everywhere): -1 for a failed node; for a valid node
  ``s~ + b`` where ``s~`` in [0, 1] is its score min-max normalised over the valid nodes so far
  (direction-aware, 1 = best) and ``b = 1`` if it set a new global best. The reward is fixed
  when the node finishes and stored on it.
* **Backpropagation**: a node's reward is added to itself and every primary-parent ancestor;
  ``visits(v)`` counts the finished nodes in v's primary subtree, ``Q(v) = sum / visits``.
  A node built from other nodes (``fuses`` / ``references`` edges) also credits each source
  and the source's primary ancestors with ``credit_share`` of a visit and of its reward, so an
  idea that helps another branch earns credit in its own. Because rewards are stored, these
  statistics are recomputed from storage alone.
* **Operator choice** (``policy="mcgs"``): root -> Draft; failed -> Debug (bounded depth);
  valid -> Improve, escalating by tier with the branch's patience; a stagnant branch's best
  node -> Evolve or Fusion (alternating); global stagnation with two good branches or more ->
  Aggregate (a new root-level node merging the branch bests). ``policy="tree"`` is the same
  UCT without graph operators; ``policy="greedy"`` is AIDE's (Jiang et al. 2025, §3).
* **Selection**: UCT ``Q(v) + C * sqrt(ln N(parent) / N(v))`` (Kocsis & Szepesvári 2006) from
  the root down to the first node that can take another child; C decays piecewise with the
  budget (ML-Master). Cost-aware: the branch's mean candidate runtime, in units of
  ``cost_penalty_share`` of the budget, is subtracted (after FLAML's cost-aware search). In-flight nodes count as visits with reward ``virtual_loss`` so that
  parallel workers spread out. Late in the budget a growing share of selections improve one of
  the global top-K nodes (exploit), as ML-Master/MLEvolve do.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Sequence

import networkx as nx

from mcgs.branches import (
    GRAPH_OPERATORS,
    Expansion,
    debug_depth,
    improve_tier,
    live_children,
    ranked_search_nodes,
)
from mcgs.direction import best_of
from mcgs.graph import _derived, branch_of, cache_entries, children, node, primary_ancestors, root_of
from mcgs.node import EdgeKind, FrozenNode, NodeState, Operator
from mcgs.operators import AT_NODE, aggregate
from mcgs.settings import SearchSettings

__all__ = [
    "compute_reward",
    "exploration_constant",
    "tree_stats",
    "uct_value",
    "select_expansion",
    "Policy",
    "MCGSPolicy",
    "TreePolicy",
    "GreedyPolicy",
    "POLICIES",
    "policy_for",
    "TREE_STATS_CACHE",
    "update_tree_stats",
]  # the branch queries it uses (branch_best, improve_tier, ...) are mcgs.branches' own


#: ``g.graph`` key of :func:`tree_stats`'s cache (carried forward by :data:`mcgs.run_graph.CACHE_UPDATERS`)
TREE_STATS_CACHE = "_mcgs_tree_stats"


def compute_reward(
    state: NodeState,
    score: float | None,
    prior_valid_scores: Sequence[float],
    higher_is_better: bool,
    improvement_threshold: float = 0.0,
) -> float:
    """Reward of a finished node (DESIGN §4).

    Args:
        state: Finished state of the node.
        score: Its engine score (VALID nodes only).
        prior_valid_scores: Scores of the valid nodes that finished before it.
        higher_is_better: Metric direction of the task.
        improvement_threshold: Minimum gain over the previous best for the bonus.

    Returns:
        -1.0 for a failure, else ``s~ + b`` in [0, 2].
    """
    if state is not NodeState.VALID or score is None:
        return -1.0
    scores = [*prior_valid_scores, score]
    lo, hi = min(scores), max(scores)
    s_norm = 1.0 if hi == lo else (score - lo) / (hi - lo)
    if not higher_is_better:
        s_norm = 1.0 - s_norm if hi != lo else 1.0
    if not prior_valid_scores:
        bonus = 1.0
    else:
        best = best_of(prior_valid_scores, higher_is_better)
        gain = (score - best) if higher_is_better else (best - score)
        bonus = 1.0 if gain > improvement_threshold else 0.0
    return s_norm + bonus


def exploration_constant(progress: float, s: SearchSettings) -> float:
    """UCT exploration constant at a given fraction of the budget spent.

    Piecewise decay after ML-Master (``decay_type: piecewise``, ``phase_ratios: [0.3, 0.7]``,
    from 1.414 to ``lower_bound`` 0.5): constant, then linear, then constant.
    """
    a, b = s.uct_decay_phases
    p = min(max(progress, 0.0), 1.0)
    if p <= a:
        return s.uct_c_start
    if p >= b or b == a:
        return s.uct_c_end
    return s.uct_c_start + (s.uct_c_end - s.uct_c_start) * (p - a) / (b - a)


@dataclasses.dataclass
class _Stats:
    visits: float = 0.0
    value: float = 0.0
    runtime_sum: float = 0.0  # candidate seconds of the finished nodes of the primary subtree
    runtime_n: int = 0

    @property
    def mean_runtime(self) -> float:
        return self.runtime_sum / self.runtime_n if self.runtime_n else 0.0


def _own_contribution(fn: FrozenNode, virtual_loss: float) -> tuple[float, float, float, int]:
    """``(visits, reward sum, runtime sum, runtime count)`` a node adds to itself and its
    primary ancestors: a finished node its reward (and its runtime), an in-flight one a visit
    with ``virtual_loss``, anything else nothing."""
    if fn.reward is not None:
        timed = fn.runtime_s is not None
        return 1.0, fn.reward, fn.runtime_s if timed else 0.0, int(timed)
    if fn.state in (NodeState.PENDING, NodeState.RUNNING):
        return 1.0, virtual_loss, 0.0, 0
    return 0.0, 0.0, 0.0, 0


def _credit_targets(g: nx.DiGraph, n: int) -> tuple[int, ...]:
    """The nodes a node's reward is credited to: its ``fuses`` / ``references`` sources and
    their primary ancestors, minus its own primary path (each once)."""
    sources = [src for src in g.predecessors(n) if g.edges[src, n]["kinds"] & {EdgeKind.FUSES, EdgeKind.REFERENCES}]
    if not sources:
        return ()
    credited: set[int] = set()
    for src in sources:
        credited |= {src, *primary_ancestors(g, src)}
    return tuple(sorted(credited - {n, *primary_ancestors(g, n)}))


def _add(stats: dict[int, _Stats], fnodes: dict[int, FrozenNode], n: int, c: tuple[float, float, float, int], sign: float) -> None:
    """Add ``sign * c`` to ``n`` and every primary ancestor (backpropagation of one node)."""
    v = n
    while v is not None and v in stats:
        st = stats[v]
        st.visits += sign * c[0]
        st.value += sign * c[1]
        st.runtime_sum += sign * c[2]
        st.runtime_n += int(sign) * c[3]
        v = fnodes[v].parent_id


def _add_credit(stats: dict[int, _Stats], record: tuple[tuple[int, ...], float], share: float, sign: float) -> None:
    targets, r = record
    for a in targets:
        stats[a].visits += sign * share
        stats[a].value += sign * share * r


def tree_stats(g: nx.DiGraph, virtual_loss: float = -1.0, credit_share: float = 0.0) -> dict[int, _Stats]:
    """Visit counts and reward sums over the primary-parent tree (backpropagation).

    Each finished node adds 1 visit and its reward to itself and every primary ancestor;
    each in-flight (PENDING/RUNNING) node adds 1 visit and ``virtual_loss``. A node with
    incoming ``fuses`` or ``references`` edges also adds ``credit_share`` of a visit and
    ``credit_share`` times its reward to each source and the source's primary ancestors (each
    ancestor credited once per node, and not twice when it is already on the node's own path).
    Finished nodes also add their candidate runtime, for cost-aware selection.

    Computed once per graph in one linear pass and cached on it; :func:`mcgs.graph.update_graph`
    then backpropagates only what changed (a new node, a node that finished, a new credit
    edge) along its primary path, as a classic MCTS does, instead of summing every node again.
    The returned dict is the cache: callers must not modify it.
    """
    entries = cache_entries(g, TREE_STATS_CACHE)
    params = (float(virtual_loss), float(credit_share))
    if params not in entries:
        entries[params] = _tree_stats_full(g, *params)
    return entries[params][0]


def _tree_stats_full(g: nx.DiGraph, virtual_loss: float, credit_share: float) -> tuple[dict[int, _Stats], dict[int, tuple]]:
    """:func:`tree_stats` from scratch: ``(stats, credit records)``, a record being
    ``(credited nodes, reward)`` of each node whose reward is credited to other branches."""
    d = _derived(g)
    fnodes = d["nodes"]
    stats: dict[int, _Stats] = {n: _Stats() for n in d["by_seq"]}
    # own contributions, then summed up the primary tree children-first (seq descending): each
    # node's total reaches every primary ancestor in one linear pass
    for n, fn in fnodes.items():
        c = _own_contribution(fn, virtual_loss)
        if c[0]:
            st = stats[n]
            st.visits, st.value, st.runtime_sum, st.runtime_n = c
    for n in reversed(d["by_seq"]):
        p = fnodes[n].parent_id
        if p is not None and p in stats:
            a, b = stats[p], stats[n]
            a.visits += b.visits
            a.value += b.value
            a.runtime_sum += b.runtime_sum
            a.runtime_n += b.runtime_n
    records: dict[int, tuple] = {}
    if credit_share > 0:
        for n, fn in fnodes.items():
            if fn.reward is None:
                continue
            targets = _credit_targets(g, n)
            if targets:
                records[n] = (targets, fn.reward)
                _add_credit(stats, records[n], credit_share, 1.0)
    return stats, records


def update_tree_stats(g: nx.DiGraph, cache: dict, changes, new_edges) -> bool:
    """The :func:`mcgs.graph.update_graph` updater of :func:`tree_stats`'s cache: backpropagate the
    difference each changed node makes, and redo the credit of nodes that changed or gained a
    credit edge."""
    fnodes = _derived(g)["nodes"]
    credit_edges = {e.dst for e in new_edges if e.kind in (EdgeKind.FUSES, EdgeKind.REFERENCES)}
    for (virtual_loss, share), (stats, records) in cache["entries"].items():
        for old, new in changes:
            if old is None:
                stats[new.id] = _Stats()
            before = _own_contribution(old, virtual_loss) if old is not None else (0.0, 0.0, 0.0, 0)
            after = _own_contribution(new, virtual_loss)
            if before != after:
                _add(stats, fnodes, new.id, before, -1.0)
                _add(stats, fnodes, new.id, after, 1.0)
        if share <= 0:
            continue
        for n in {new.id for _, new in changes} | credit_edges:
            if n in records:
                _add_credit(stats, records.pop(n), share, -1.0)
            fn = fnodes[n]
            targets = _credit_targets(g, n) if fn.reward is not None else ()
            if targets:
                records[n] = (targets, fn.reward)
                _add_credit(stats, records[n], share, 1.0)
    return True



def uct_value(child: _Stats, parent: _Stats, c: float, cost_scale_s: float = 0.0) -> float:
    """``Q(v) + C * sqrt(ln N(parent) / N(v)) - cost(v)``; +inf for an unvisited child.

    ``cost(v)`` is the mean candidate runtime of v's finished primary subtree divided by
    ``cost_scale_s`` (0 = no cost term): the cost-aware variant, see
    :attr:`~mcgs.settings.SearchSettings.cost_penalty_share`.
    """
    if child.visits <= 0:
        return math.inf
    q = child.value / child.visits
    cost = child.mean_runtime / cost_scale_s if cost_scale_s > 0 else 0.0
    return q + c * math.sqrt(math.log(max(parent.visits, 1.0)) / child.visits) - cost



def _expansion_at(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool, graph_ops: bool = False) -> Expansion | None:
    """The first operator of :data:`mcgs.operators.AT_NODE` that proposes an expansion of ``v``
    (Evolve and Fusion only with ``graph_ops``), or None."""
    for op in AT_NODE:
        if not graph_ops and op.OPERATOR in GRAPH_OPERATORS:
            continue
        exp = op.propose(g, v, s, higher_is_better)
        if exp is not None:
            return exp
    return None


class _Selectable:
    """Whether a node, or some node below it, can take another child now; computed on demand
    for the nodes UCT's descent looks at, and remembered for the rest of the selection.

    A node is selectable when it is finished (or the root) and either it can be expanded
    (:func:`_expansion_at`) or one of its primary children is selectable. Only the children on
    the descent path are asked, and the search below a child stops at the first expandable
    node, so a selection touches a small part of a large graph instead of every node. The
    walk is iterative: chains of exhausted nodes can be deeper than Python's recursion limit.
    """

    def __init__(self, g: nx.DiGraph, s: SearchSettings, higher_is_better: bool, graph_ops: bool = False):
        self.g, self.s, self.hib, self.graph_ops = g, s, higher_is_better, graph_ops
        self.memo: dict[int, bool] = {}

    def _own(self, v: int) -> bool | None:
        """True/False when v decides by itself; None when its children decide."""
        fn = node(self.g, v)
        if not (fn.state.is_finished() or fn.state is NodeState.ROOT):
            return False
        if _expansion_at(self.g, v, self.s, self.hib, self.graph_ops) is not None:
            return True
        return None

    def __call__(self, v: int) -> bool:
        memo = self.memo
        if v in memo:
            return memo[v]
        # frames: [node, iterator over its children, the child being decided (or None)]
        stack: list[list] = [[v, None, None]]
        while stack:
            frame = stack[-1]
            u, kids, waiting = frame
            if kids is None:  # first visit
                own = self._own(u)
                if own is not None:
                    memo[u] = own
                    stack.pop()
                    continue
                kids = frame[1] = iter(children(self.g, u))
            if waiting is not None and memo[waiting]:
                memo[u] = True
                stack.pop()
                continue
            frame[2] = None
            for c in kids:
                if c not in memo:
                    frame[2] = c
                    stack.append([c, None, None])  # decide c, then come back
                    break
                if memo[c]:
                    memo[u] = True
                    stack.pop()
                    break
            else:
                memo[u] = False
                stack.pop()
        return memo[v]


def _exploit_expansion(g: nx.DiGraph, s: SearchSettings, progress: float, higher_is_better: bool, rng: random.Random) -> Expansion | None:
    """Late in the budget, improve one of the global top-K (K at most half the valid nodes,
    at most ``exploit_per_branch`` per branch) with a probability rising from 0 at ``exploit_start`` to
    ``exploit_max_share`` at ``exploit_full``."""
    if progress <= s.exploit_start:
        return None
    ramp = 1.0 if s.exploit_full <= s.exploit_start else min(1.0, (progress - s.exploit_start) / (s.exploit_full - s.exploit_start))
    if rng.random() >= s.exploit_max_share * ramp:
        return None
    ranked = ranked_search_nodes(g, higher_is_better)
    # never more than the better half: with few valid nodes a "top-3" would include the worst
    k = min(s.exploit_top_k, max(1, len(ranked) // 2))
    top, per_branch = [], {}
    for *_, nid in ranked:
        n = node(g, nid)
        b = branch_of(g, n.id)
        if per_branch.get(b, 0) < s.exploit_per_branch:
            top.append(n)
            per_branch[b] = per_branch.get(b, 0) + 1
        if len(top) == k:
            break
    if not top:
        return None
    pick = rng.choice(top)
    return Expansion(pick.id, Operator.IMPROVE, tier=improve_tier(g, pick.id, s, higher_is_better), reason="exploit: improve a global top-K node")


def _select_uct(g: nx.DiGraph, s: SearchSettings, progress: float, higher_is_better: bool, rng: random.Random, graph_ops: bool) -> Expansion:
    root = root_of(g)
    if graph_ops:
        exp = aggregate.propose(g, s, higher_is_better)
        if exp is not None:
            return exp
    exp = _exploit_expansion(g, s, progress, higher_is_better, rng)
    if exp is not None:
        return exp
    selectable = _Selectable(g, s, higher_is_better, graph_ops)
    stats = tree_stats(g, s.virtual_loss, s.credit_share if graph_ops else 0.0)
    c = exploration_constant(progress, s)
    cost_scale = s.cost_penalty_share * s.time_budget_s
    v = root
    while True:
        exp = _expansion_at(g, v, s, higher_is_better, graph_ops)
        if exp is not None:
            return exp
        cands = [ch for ch in children(g, v) if selectable(ch)]
        if not cands:
            return Expansion(root, Operator.DRAFT, reason="every branch is exhausted: extra draft")
        scored = [(uct_value(stats[ch], stats[v], c, cost_scale), rng.random(), ch) for ch in cands]
        v = max(scored)[2]


def _select_greedy(g: nx.DiGraph, s: SearchSettings, higher_is_better: bool, rng: random.Random) -> Expansion:
    """AIDE's search policy (Jiang et al. 2025, ``aide/agent.py: search_policy``): draft until
    ``num_drafts`` drafts exist; with probability ``debug_prob`` debug a random failed leaf
    whose debug depth is below the limit; else improve the best valid node (draft again when
    there is none). In-flight nodes are skipped so parallel workers do not collide."""
    root = root_of(g)
    drafts = [c for c in live_children(g, root) if node(g, c).operator is Operator.DRAFT]
    if len(drafts) < s.num_drafts:
        return Expansion(root, Operator.DRAFT, reason=f"draft {len(drafts) + 1} of {s.num_drafts}")
    if rng.random() < s.debug_prob:
        leaves = [
            d["node"] for v, d in g.nodes(data=True)
            if d["node"].state.is_failure() and not live_children(g, v) and debug_depth(g, v) < s.max_debug_depth
        ]
        if leaves:
            pick = rng.choice(sorted(leaves, key=lambda n: n.seq))
            return Expansion(pick.id, Operator.DEBUG, reason=f"greedy: debug a failed leaf (depth {debug_depth(g, pick.id) + 1})")
    ranked = ranked_search_nodes(g, higher_is_better)
    if not ranked:
        return Expansion(root, Operator.DRAFT, reason="greedy: no valid node yet, draft again")
    best = node(g, ranked[0][2])
    return Expansion(best.id, Operator.IMPROVE, tier=improve_tier(g, best.id, s, higher_is_better), reason="greedy: improve the best node")


class Policy:
    """A search policy: which node to expand next, and with which operator (Optuna's samplers
    are the model: a small strategy object, chosen by name in the settings or set on the
    search, ``search.policy = ...``).

    Attributes:
        name: The ``policy`` setting that selects it.
        graph_operators: Whether it uses Evolve, Fusion and Aggregate and credits the sources
            of a merged node (the graph); without, selection is UCT over the tree.
        ensembles_during_search: Whether ensemble nodes are built during the search (every
            ``ensemble_every`` valid nodes), not only at its end.
    """

    name = ""
    graph_operators = False
    ensembles_during_search = False

    def select(self, g: nx.DiGraph, s: SearchSettings, *, progress: float, higher_is_better: bool, rng: random.Random) -> Expansion:
        """The next expansion (see :func:`select_expansion` for the arguments)."""
        raise NotImplementedError


class TreePolicy(Policy):
    """UCT over the tree of primary parents (Kocsis & Szepesvári 2006) with the piecewise-decayed
    exploration constant, virtual loss and the late exploit phase: Draft, Debug, Improve only."""

    name = "tree"

    def select(self, g, s, *, progress, higher_is_better, rng):
        return _select_uct(g, s, progress, higher_is_better, rng, graph_ops=self.graph_operators)


class MCGSPolicy(TreePolicy):
    """Monte Carlo Graph Search: :class:`TreePolicy` plus Evolve or Fusion on a stagnant branch,
    Aggregate on global stagnation, credit to the sources of merged nodes, and ensembles during
    the search (AutoMLGen / MLEvolve)."""

    name = "mcgs"
    graph_operators = True
    ensembles_during_search = True


class GreedyPolicy(Policy):
    """AIDE's policy (Jiang et al. 2025): draft, then debug a failed leaf with probability
    ``debug_prob``, else improve the best node."""

    name = "greedy"

    def select(self, g, s, *, progress, higher_is_better, rng):
        return _select_greedy(g, s, higher_is_better, rng)


#: The built-in policies by their setting name.
POLICIES: dict[str, type[Policy]] = {p.name: p for p in (MCGSPolicy, TreePolicy, GreedyPolicy)}


def policy_for(s: SearchSettings) -> Policy:
    """The built-in policy named by ``s.policy``.

    Raises:
        ValueError: no policy has that name.
    """
    try:
        return POLICIES[s.policy]()
    except KeyError:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {s.policy!r}") from None


def select_expansion(
    g: nx.DiGraph,
    s: SearchSettings,
    *,
    progress: float,
    higher_is_better: bool,
    rng: random.Random,
    policy: Policy | None = None,
) -> Expansion:
    """Choose the next node to expand and the operator, by ``policy`` (default the one
    ``s.policy`` names: :func:`policy_for`; DESIGN §4).

    Args:
        g: The search graph.
        s: Settings (policy, child limits, UCT constants, stagnation windows).
        progress: Fraction of the budget spent, in [0, 1].
        higher_is_better: Metric direction.
        rng: The search's random generator (exploit and debug draws, UCT ties).
        policy: The strategy (:class:`Policy`).

    Returns:
        An :class:`Expansion`. With the UCT policies, when nothing in the tree can take a child
        (every branch exhausted), the root takes an extra draft, so the search never stalls.
    """
    return (policy or policy_for(s)).select(g, s, progress=progress, higher_is_better=higher_is_better, rng=rng)
