"""Evolve: a new node for a stagnant branch, written from the branch's own trajectory — what
was tried on it and which changes helped (DESIGN §4; MLEvolve's trajectory-aware evolution).

* **When** (:func:`propose`, graph policies only): selection reaches a valid node of a stagnant
  branch whose best node has room for a graph child, and Fusion does not apply there (no other
  branch has a valid node, or Fusion went last: the two alternate).
* **Request** (:func:`build_request`): the branch best as parent, the branch's other finished
  nodes (in creation order) as references.
* **Edges**: ``derives`` from the branch best and a ``references`` edge from each history node,
  so the graph records what the new node was built from.
* **Prompt**: ``operators/prompts/evolve.j2``.
* **Recipe step** (:func:`recipe_step`): every change that improved on its parent elsewhere on
  the branch is re-applied to the branch best when the best lacks it; when none is left, a
  change nobody on the branch tried.
"""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any

import networkx as nx

from mcgs.branches import Expansion, branch_members, stagnant_branch_at
from mcgs.coders import CoderRequest
from mcgs.coders.recipe_config import changes, mutate_params, toggle_feature, parent_not_recipe
from mcgs.knowledge_base import get_entry
from mcgs.node import Operator
from mcgs.operators.context import OperatorContext
from mcgs.settings import SearchSettings

if TYPE_CHECKING:
    from mcgs.coders.recipe import RecipeCoder

#: The operator this module implements.
OPERATOR = Operator.EVOLVE
#: The LLM prompt template of this operator, in ``operators/prompts/``.
PROMPT = "evolve.j2"


def propose(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    """An evolution of the branch best of ``v`` when its branch is stagnant and the best has
    room for a graph child; else None. The policy asks :func:`mcgs.operators.fusion.propose`
    first."""
    st = stagnant_branch_at(g, v, s, higher_is_better)
    if st is None:
        return None
    history = tuple(m.id for m in branch_members(g, st.head) if m.id != st.best.id and m.state.is_finished())
    return Expansion(st.best.id, Operator.EVOLVE, reason=f"evolve: branch stagnant for {st.since} nodes; learn from its {len(history)} other nodes", references=history)


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an evolution of the branch best ``exp.parent_id``; ``exp.references`` are the
    branch's other finished nodes, in creation order."""
    return ctx.request(exp, Operator.EVOLVE)


#: Why the recipe coder cannot build on the request (its parent holds no recipe config), or None.
recipe_foreign = parent_not_recipe


def recipe_step(coder: "RecipeCoder", req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
    """The recipe coder's evolution of the branch best ``req.parent`` from its history
    ``req.references``: ``(config, plan)`` (see the module's *Recipe step*)."""
    best = req.parent
    assert best is not None
    config = copy.deepcopy(best.config)
    by_id = {n.id: n for n in (best, *req.references)}
    helped = []  # (gain, node, parent) where the node's change beat its parent
    for n in req.references:
        p = by_id.get(n.parent_id)
        if n.is_valid and p is not None and p.is_valid and n.fidelity == p.fidelity and n.config and p.config:
            gain = (n.score - p.score) if req.task.higher_is_better else (p.score - n.score)
            if gain > 0 and n.config.get("model") == p.config.get("model"):
                helped.append((gain, n, p))
    applied = []
    for _, n, p in sorted(helped, key=lambda t: -t[0]):
        if n.config.get("model") != config["model"]:
            continue
        for k, v in n.config["params"].items():
            if p.config["params"].get(k) != v and config["params"].get(k) != v:
                config["params"][k] = v
                applied.append(f"{k}={v} (node {n.seq})")
        for f, on in n.config["features"].items():
            if p.config["features"].get(f) != on and config["features"].get(f) != on:
                config["features"][f] = on
                applied.append(f"{'add' if on else 'drop'} {f} (node {n.seq})")
        if n.config.get("n_seeds", 1) > p.config.get("n_seeds", 1) > 0 and config.get("n_seeds", 1) < n.config["n_seeds"]:
            config["n_seeds"] = n.config["n_seeds"]
            applied.append(f"{n.config['n_seeds']} seeds (node {n.seq})")
    tried = changes(req.references)
    if applied:
        config["change"] = "evolve:reapply"
        desc = "re-apply the changes that helped elsewhere on the branch: " + ", ".join(applied)
    else:
        toggled = toggle_feature(config, req.profile, rng, tried)
        if toggled is not None:
            desc = f"no change on the branch helped; try what nobody tried: {toggled}"
        else:
            config, change = mutate_params(config, get_entry(config["model"]), rng, avoid=tried)
            desc = f"no change on the branch helped; untried parameter move: {change}"
    n_valid = sum(1 for n in req.references if n.is_valid)
    plan = f"Evolve node {best.seq} (branch best, score {best.score}) from its branch's {len(req.references)} other nodes ({n_valid} valid, {len(helped)} improved on their parent): {desc}."
    return config, plan
