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
  Because rewards are stored, these statistics are recomputed from storage alone.
* **Selection**: UCT ``Q(v) + C * sqrt(ln N(parent) / N(v))`` (Kocsis & Szepesvári 2006) from
  the root down to the first node that can take another child; C decays piecewise with the
  budget (ML-Master). In-flight nodes count as visits with reward ``virtual_loss`` so that
  parallel workers spread out. Late in the budget a growing share of selections improve one of
  the global top-K nodes (exploit), as ML-Master/MLEvolve do.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Sequence

import networkx as nx

from mcgs.graph import children, node, primary_ancestors, root_of, valid_nodes
from mcgs.node import NodeState, Operator
from mcgs.settings import SearchSettings

__all__ = [
    "Expansion",
    "compute_reward",
    "exploration_constant",
    "tree_stats",
    "uct_value",
    "select_expansion",
    "improve_tier",
    "debug_depth",
]

IMPROVE_TIERS = ("params", "features", "strategy")

# Share of selections taken from the global top-K at the very end of the budget, the
# progress at which exploitation starts, and K. ML-Master switches to exploitation after
# about half the budget; the exact schedule here is ours.
EXPLOIT_START = 0.6
EXPLOIT_MAX_SHARE = 0.5
EXPLOIT_TOP_K = 3


@dataclasses.dataclass(frozen=True)
class Expansion:
    """What to expand next: a primary parent and the operator that writes the child.

    Attributes:
        parent_id: Node to expand.
        operator: DRAFT (parent = root), DEBUG (failed parent) or IMPROVE (valid parent).
        tier: For IMPROVE, index into :data:`IMPROVE_TIERS` (0 params, 1 features, 2 strategy).
        reason: Short human-readable why, stored with the node's plan.
    """

    parent_id: int
    operator: Operator
    tier: int = 0
    reason: str = ""


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
        best = max(prior_valid_scores) if higher_is_better else min(prior_valid_scores)
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


def tree_stats(g: nx.DiGraph, virtual_loss: float = -1.0) -> dict[int, _Stats]:
    """Visit counts and reward sums over the primary-parent tree (backpropagation).

    Each finished node adds 1 visit and its reward to itself and every primary ancestor;
    each in-flight (PENDING/RUNNING) node adds 1 visit and ``virtual_loss``.
    """
    stats: dict[int, _Stats] = {n: _Stats() for n in g.nodes}
    for n, data in g.nodes(data=True):
        fn = data["node"]
        if fn.reward is not None:
            r = fn.reward
        elif fn.state in (NodeState.PENDING, NodeState.RUNNING):
            r = virtual_loss
        else:
            continue
        for a in (n, *primary_ancestors(g, n)):
            st = stats[a]
            st.visits += 1
            st.value += r
    return stats


def uct_value(child: _Stats, parent: _Stats, c: float) -> float:
    """``Q(v) + C * sqrt(ln N(parent) / N(v))``; +inf for an unvisited child."""
    if child.visits <= 0:
        return math.inf
    q = child.value / child.visits
    return q + c * math.sqrt(math.log(max(parent.visits, 1.0)) / child.visits)


def _live_children(g: nx.DiGraph, v: int) -> list[int]:
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


def improve_tier(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> int:
    """Improve tier of a node's branch: escalate with the branch's patience.

    Counts the valid nodes in the branch (the primary subtree of v's draft) created after the
    branch's best; 0 while that count is below ``branch_patience`` (parameter changes), 1
    below twice the patience (feature engineering), else 2 (strategy changes).
    """
    chain = [v, *primary_ancestors(g, v)]
    head = chain[-2] if len(chain) >= 2 else v
    members = [node(g, n) for n in [head, *nx.descendants(g, head)] if node(g, n).is_valid and node(g, n).parent_id is not None]
    members = [m for m in members if head in (m.id, *primary_ancestors(g, m.id))]
    if not members:
        return 0
    members.sort(key=lambda m: m.seq)
    best = members[0]
    for m in members[1:]:
        if (m.score > best.score) if higher_is_better else (m.score < best.score):
            best = m
    since = sum(1 for m in members if m.seq > best.seq)
    return min(since // s.branch_patience, len(IMPROVE_TIERS) - 1)


def _expansion_at(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    fn = node(g, v)
    kids = _live_children(g, v)
    if fn.state is NodeState.ROOT:
        drafts = [c for c in kids if node(g, c).operator is Operator.DRAFT]
        if len(drafts) < s.num_drafts:
            return Expansion(v, Operator.DRAFT, reason=f"draft {len(drafts) + 1} of {s.num_drafts}")
        return None
    if fn.state.is_failure():
        debug_kids = [c for c in kids if node(g, c).operator is Operator.DEBUG]
        if len(debug_kids) < s.num_debug_children and debug_depth(g, v) < s.max_debug_depth:
            return Expansion(v, Operator.DEBUG, reason=f"debug {fn.state.value} node (depth {debug_depth(g, v) + 1})")
        return None
    if fn.state is NodeState.VALID and fn.operator is not Operator.ENSEMBLE:
        imp = [c for c in kids if node(g, c).operator is Operator.IMPROVE]
        if len(imp) < s.num_improve_children:
            tier = improve_tier(g, v, s, higher_is_better)
            return Expansion(v, Operator.IMPROVE, tier=tier, reason=f"improve ({IMPROVE_TIERS[tier]})")
    return None


def _selectable(g: nx.DiGraph, s: SearchSettings, higher_is_better: bool) -> dict[int, bool]:
    """Whether each node, or some node below it, can take another child now."""
    out: dict[int, bool] = {}
    for v in reversed(list(nx.topological_sort(g))):
        fn = node(g, v)
        if not (fn.state.is_finished() or fn.state is NodeState.ROOT):
            out[v] = False
            continue
        out[v] = _expansion_at(g, v, s, higher_is_better) is not None or any(out.get(c, False) for c in children(g, v))
    return out


def select_expansion(
    g: nx.DiGraph,
    s: SearchSettings,
    *,
    progress: float,
    higher_is_better: bool,
    rng: random.Random,
) -> Expansion:
    """Choose the next node to expand and the operator (DESIGN §4).

    Args:
        g: The search graph.
        s: Settings (child limits, UCT constants).
        progress: Fraction of the budget spent, in [0, 1].
        higher_is_better: Metric direction.
        rng: The search's random generator (exploit draws and UCT ties).

    Returns:
        An :class:`Expansion`. When nothing in the tree can take a child (every branch
        exhausted), the root takes an extra draft, so the search never stalls.
    """
    root = root_of(g)
    # Exploit: late in the budget, improve one of the global top-K nodes.
    share = EXPLOIT_MAX_SHARE * max(0.0, (progress - EXPLOIT_START) / (1.0 - EXPLOIT_START))
    valid = valid_nodes(g)
    valid = [n for n in valid if n.operator is not Operator.ENSEMBLE]
    if valid and share > 0 and rng.random() < share:
        ranked = sorted(valid, key=lambda n: (-n.score if higher_is_better else n.score, n.seq))[:EXPLOIT_TOP_K]
        pick = rng.choice(ranked)
        return Expansion(pick.id, Operator.IMPROVE, tier=improve_tier(g, pick.id, s, higher_is_better), reason="exploit: improve a global top-K node")
    selectable = _selectable(g, s, higher_is_better)
    stats = tree_stats(g, s.virtual_loss)
    c = exploration_constant(progress, s)
    v = root
    while True:
        exp = _expansion_at(g, v, s, higher_is_better)
        if exp is not None:
            return exp
        cands = [ch for ch in children(g, v) if selectable.get(ch)]
        if not cands:
            return Expansion(root, Operator.DRAFT, reason="every branch is exhausted: extra draft")
        scored = [(uct_value(stats[ch], stats[v], c), rng.random(), ch) for ch in cands]
        v = max(scored)[2]
