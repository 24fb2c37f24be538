"""Improve: a child of a valid node that changes one thing, escalating by tier
(parameters -> features -> strategy) as the branch's patience runs out (MLEvolve's tiers).

* **When** (:func:`propose`): at a valid search node (not an ensemble) with fewer than
  ``num_improve_children`` live improve children; the tier is
  :func:`mcgs.branches.improve_tier`. Late in the budget the UCT policies also improve one of
  the global top-K nodes (exploit), and the greedy policy improves the best node.
* **Request** (:func:`build_request`): the parent, its lineage and its siblings, so the coder
  does not repeat a change already tried.
* **Edges**: ``derives`` from the parent.
* **Prompt**: ``operators/prompts/improve.j2``.
* **Recipe step** (:func:`recipe_step`): tier 0 changes one model parameter within its range
  (one not changed by a sibling), 1 toggles a feature block, 2 changes strategy (another model
  family or seed averaging); a tier with nothing left falls to the one below.
"""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any

import networkx as nx

from mcgs.branches import IMPROVE_TIERS, Expansion, improve_tier, live_children
from mcgs.coders import CoderRequest
from mcgs.coders.recipe_config import changes, default_config, mutate_params, toggle_feature, parent_not_recipe
from mcgs.graph import node
from mcgs.knowledge_base import get_entry
from mcgs.node import NodeState, Operator
from mcgs.operators.context import OperatorContext
from mcgs.settings import SearchSettings

if TYPE_CHECKING:
    from mcgs.coders.recipe import RecipeCoder

#: The operator this module implements.
OPERATOR = Operator.IMPROVE
#: The LLM prompt template of this operator, in ``operators/prompts/``.
PROMPT = "improve.j2"


def propose(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    """An improvement when ``v`` is a valid search node with room for one more, else None."""
    fn = node(g, v)
    if fn.state is not NodeState.VALID or fn.operator is Operator.ENSEMBLE:
        return None
    imp = [c for c in live_children(g, v) if node(g, c).operator is Operator.IMPROVE]
    if len(imp) < s.num_improve_children:
        tier = improve_tier(g, v, s, higher_is_better)
        return Expansion(v, Operator.IMPROVE, tier=tier, reason=f"improve ({IMPROVE_TIERS[tier]})")
    return None


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an improvement of ``exp.parent_id`` at tier ``exp.tier``; siblings are passed
    so the coder does not repeat a change already tried."""
    return ctx.request(exp, Operator.IMPROVE)


#: Why the recipe coder cannot build on the request (its parent holds no recipe config), or None.
recipe_foreign = parent_not_recipe


def recipe_step(coder: "RecipeCoder", req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
    """The recipe coder's improvement of ``req.parent`` at ``req.tier``: ``(config, plan)``."""
    parent = req.parent
    assert parent is not None
    config = copy.deepcopy(parent.config)
    entry = get_entry(config["model"])
    avoid = changes(req.siblings)
    tier = req.tier
    desc = ""
    if tier == 2:
        out = _strategy_change(coder, config, req, rng, avoid)
        if out is not None:
            config, desc = out
        else:
            tier = 1
    if tier == 1:
        toggled = toggle_feature(config, req.profile, rng, avoid)
        if toggled is not None:
            desc = toggled
        else:
            tier = 0
    if tier == 0:
        config, desc = mutate_params(config, entry, rng, avoid)
    tiers = ("parameters", "features", "strategy")
    plan = f"Improve ({tiers[tier]}) node {parent.seq} ({entry.title}, score {parent.score}): {desc}."
    return config, plan


def _strategy_change(coder: "RecipeCoder", config: dict[str, Any], req: CoderRequest, rng: random.Random, avoid: set[str]) -> tuple[dict, str] | None:
    """Seed averaging (for a seeded model with one seed) or a model family the lineage has not
    used, keeping the feature blocks; None when neither is left."""
    options = []
    if config.get("n_seeds", 1) == 1 and "strategy:seed_averaging" not in avoid and get_entry(config["model"]).recipe.seeded:
        options.append("seed_averaging")
    lineage_models = {n.config.get("model") for n in (req.parent, *req.lineage) if n is not None and n.config}
    for m in coder.applicable_models(req.profile):
        if m.id != config["model"] and f"strategy:model:{m.id}" not in avoid and m.id not in lineage_models:
            options.append(m.id)
    if not options:
        return None
    choice = rng.choice(options)
    if choice == "seed_averaging":
        config["n_seeds"] = 3
        config["change"] = "strategy:seed_averaging"
        return config, "average 3 seeds per fold (strategy.seed_averaging)"
    new = default_config(choice, req.profile)
    new["features"] = dict(config["features"])
    new["change"] = f"strategy:model:{choice}"
    return new, f"switch model family to {get_entry(choice).title}, keeping the feature blocks"
