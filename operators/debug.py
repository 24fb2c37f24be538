"""Debug: fix a failed node (error, timeout, memory, disk, process limit, invalid output) given
its outcome.

* **When** (:func:`propose`): at a failed node with fewer than ``num_debug_children`` live debug
  children, while its chain of debug steps is shorter than ``max_debug_depth`` (AIDE's bound).
* **Request** (:func:`build_request`): the failed node and its lineage, so the coder can fall
  back to the last valid program of the chain.
* **Edges**: ``derives`` from the failed node.
* **Prompt**: ``operators/prompts/debug.j2``.
* **Recipe step** (:func:`recipe_step`): maps failure classes to fixes: a timeout or a memory,
  disk or process limit makes the program cheaper, a missing package switches the model family,
  anything else falls back to the nearest valid ancestor's config or to the cheapest recipe.
"""

from __future__ import annotations

import copy
import random
import re
from typing import TYPE_CHECKING, Any

import networkx as nx

from mcgs.branches import Expansion, debug_depth, live_children
from mcgs.coders import CoderRequest
from mcgs.coders.recipe_config import COST_PARAMS, FEATURE_ORDER, default_config, last_line, parent_not_recipe
from mcgs.graph import node
from mcgs.knowledge_base import get_entry
from mcgs.node import NodeState, Operator
from mcgs.operators.context import OperatorContext
from mcgs.settings import SearchSettings

if TYPE_CHECKING:
    from mcgs.coders.recipe import RecipeCoder

#: The operator this module implements.
OPERATOR = Operator.DEBUG
#: The LLM prompt template of this operator, in ``operators/prompts/``.
PROMPT = "debug.j2"

#: Failure states fixed by making the program cheaper.
RESOURCE_FAILURES = (NodeState.TIMEOUT, NodeState.OOM, NodeState.DISK, NodeState.PROCESS_LIMIT)


def propose(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    """A debug step when ``v`` failed and has room for one more (see the module's *When*), else None."""
    fn = node(g, v)
    if not fn.state.is_failure():
        return None
    debug_kids = [c for c in live_children(g, v) if node(g, c).operator is Operator.DEBUG]
    if len(debug_kids) < s.num_debug_children and debug_depth(g, v) < s.max_debug_depth:
        return Expansion(v, Operator.DEBUG, reason=f"debug {fn.state.value} node (depth {debug_depth(g, v) + 1})")
    return None


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a fix of ``exp.parent_id``; its lineage lets the coder fall back to the last
    valid program of the chain."""
    return ctx.request(exp, Operator.DEBUG)


#: Why the recipe coder cannot build on the request (its parent holds no recipe config), or None.
recipe_foreign = parent_not_recipe


def recipe_step(coder: "RecipeCoder", req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
    """The recipe coder's fix of ``req.parent``: ``(config, plan)`` (see the module's *Recipe step*)."""
    parent = req.parent
    assert parent is not None
    config = copy.deepcopy(parent.config) if parent.config else default_config(coder.cheapest(req.profile), req.profile)
    error = (parent.error or "") + "\n" + (parent.stderr_tail or "")[-2000:]
    if parent.state in RESOURCE_FAILURES:
        for name in COST_PARAMS:
            if name in config["params"]:
                config["params"][name] = max(50, int(config["params"][name] * 0.5))
        config["n_seeds"] = 1
        entry = get_entry(config["model"])
        if entry.recipe.relative_cost > 2.0:
            cheaper = coder.cheapest(req.profile, exclude=entry.id, max_priority=entry.recipe.priority)
            config = default_config(cheaper, req.profile) | {"features": config["features"]}
        config["change"] = f"debug:{parent.state.value}"
        return config, f"Debug {parent.state.value} of node {parent.seq}: make the program cheaper (half the boosting rounds, one seed, a cheaper model family if needed)."
    if re.search(r"ModuleNotFoundError|ImportError", error):
        fallback = coder.cheapest(req.profile, exclude=config.get("model"))
        new = default_config(fallback, req.profile)
        new["change"] = "debug:import"
        return new, f"Debug node {parent.seq}: a package is missing ({last_line(error)}); switch to {get_entry(fallback).title}."
    good = next((n for n in req.lineage if n.state is NodeState.VALID and n.config), None)
    if good is not None:
        new = copy.deepcopy(good.config)
        new["change"] = "debug:revert"
        return new, f"Debug node {parent.seq} ({last_line(error)}): revert to the last valid config in its lineage (node {good.seq})."
    new = default_config(coder.cheapest(req.profile), req.profile)
    new["features"] = {f: False for f in FEATURE_ORDER}
    new["change"] = "debug:safe"
    return new, f"Debug node {parent.seq} ({last_line(error)}): fall back to the cheapest recipe ({get_entry(new['model']).title}) on the raw columns."
