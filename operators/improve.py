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
  family or seed averaging); a tier with nothing left falls to the one below. Parameter and
  strategy changes are drawn by expected gain per second (:func:`gain_per_second`): what each
  kind of change has gained so far in the run (:func:`observed_gains`) over the cost model's
  prediction of the changed program's run time.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import TYPE_CHECKING, Any, Callable

import networkx as nx

from mcgs.branches import IMPROVE_TIERS, Expansion, improve_tier, live_children
from mcgs.coders import CoderRequest
from mcgs.coders.recipe_config import changes, default_config, mutate_params, toggle_feature, parent_not_recipe
from mcgs.cost_model import CostModel, cost_model_from_nodes
from mcgs.direction import best_of
from mcgs.graph import node, nodes_by_seq
from mcgs.knowledge_base import get_entry
from mcgs.node import FrozenNode, NodeState, Operator
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


#: Pseudo-tries of the run's mean gain that a change's own mean gain is shrunk towards
#: (:func:`gain_per_second`): one try of a change weighs as much as the prior.
PRIOR_TRIES = 1.0
#: A change's expected gain is at least this share of the run's mean gain, so a change that has
#: not paid yet is still drawn now and then.
GAIN_FLOOR = 0.1
#: The mean relative gain a change is expected to bring before the run has seen any (0.5 %; ours,
#: an assumption, not a measurement). Before any gain only the costs differ, so it matters only
#: against a family's known lead or shortfall (:func:`gain_per_second`).
PRIOR_GAIN = 0.005
#: States of an Improve child whose outcome says what its change gained (0 unless valid).
_OUTCOME_STATES = frozenset({NodeState.VALID, NodeState.BUGGY, NodeState.TIMEOUT, NodeState.OOM, NodeState.INVALID_OUTPUT,
                             NodeState.DISK, NodeState.PROCESS_LIMIT})


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request an improvement of ``exp.parent_id`` at tier ``exp.tier``; siblings are passed
    so the coder does not repeat a change already tried, and what each kind of change has
    gained so far (:func:`observed_gains`), each family's best score at the parent's fidelity
    and the run's calibrated cost model, so it can weigh a change by its expected gain per
    second."""
    nodes = nodes_by_seq(ctx.graph)
    fidelity = ctx.node(exp.parent_id).fidelity
    best: dict[str, float] = {}
    for n in nodes:
        if n.state is NodeState.VALID and n.score is not None and n.fidelity == fidelity and n.operator is not Operator.ENSEMBLE and n.config.get("model"):
            m = n.config["model"]
            best[m] = n.score if m not in best else best_of([best[m], n.score], ctx.task.higher_is_better)
    return dataclasses.replace(ctx.request(exp, Operator.IMPROVE), move_gains=observed_gains(nodes, ctx.task.higher_is_better),
                               family_scores=best, costs=cost_model_from_nodes(ctx.profile, ctx.task.validation, nodes,
                                                                           ctx.experience.cost_offsets if ctx.experience else None))


def observed_gains(nodes: list[FrozenNode], higher_is_better: bool) -> dict[str, tuple[int, float]]:
    """What each kind of change has gained in a run: ``"<parent's model> <change>"`` -> ``(tries,
    mean gain)``, and ``"*"`` over every change.

    A try is a finished Improve node with a recipe config whose parent is valid and of the
    same fidelity (scores of different fidelities are not compared, :mod:`mcgs.fidelity`).
    Its gain is its relative improvement on the parent, ``max(0, better - worse) / |parent
    score|`` in the metric's direction; 0 when it is not better or did not produce a valid
    result (its time was spent for nothing).

    Args:
        nodes: The run's nodes (any order); parents are looked up among them.
        higher_is_better: The task's metric direction.
    """
    by_id = {n.id: n for n in nodes}
    gains: dict[str, list[float]] = {}
    for n in nodes:
        parent = by_id.get(n.parent_id) if n.parent_id is not None else None
        if (n.operator is not Operator.IMPROVE or n.state not in _OUTCOME_STATES or not n.config.get("change") or parent is None
                or parent.state is not NodeState.VALID or parent.score is None or parent.fidelity != n.fidelity or not parent.config.get("model")):
            continue
        gain = 0.0
        if n.state is NodeState.VALID and n.score is not None:
            diff = n.score - parent.score if higher_is_better else parent.score - n.score
            gain = max(0.0, diff) / max(abs(parent.score), 1e-12)
        for key in (f"{parent.config['model']} {n.config['change']}", "*"):
            gains.setdefault(key, []).append(gain)
    return {k: (len(v), sum(v) / len(v)) for k, v in gains.items()}


def gain_per_second(req: CoderRequest, model: str) -> Callable[[dict[str, Any]], float]:
    """A weight for a changed config of ``model``: its change's expected gain over its predicted
    run time (seconds) at the parent's fidelity. FLAML's learner choice by estimated cost for
    improvement (Wang, Wu, Weimer, Zhu: *FLAML: A Fast and Lightweight AutoML Library*, MLSys
    2021) is the model for weighing what to try by gain per cost.

    The expected gain of a change is its mean gain in the run (``req.move_gains``), shrunk
    towards the run's mean gain over every change by :data:`PRIOR_TRIES` pseudo-tries, and at
    least :data:`GAIN_FLOOR` of it; a change never tried expects the run's mean gain
    (:data:`PRIOR_GAIN` before any try, when only the costs differ). A switch to a model family the run has already scored
    (``req.family_scores``) expects the run's mean gain plus that family's relative lead on the
    parent, at least 1 % of the mean gain: a family far behind the parent is rarely drawn,
    however cheap. The run time is ``req.costs``' calibrated prediction (the uncalibrated prior
    when the request has no cost model)."""
    n_all, mean_all = req.move_gains.get("*", (0, 0.0))
    base = mean_all if n_all and mean_all > 0 else PRIOR_GAIN
    costs = req.costs if req.costs is not None else CostModel.for_task(req.profile, req.task.validation)
    parent = req.parent
    fidelity = parent.fidelity if parent is not None else 1.0

    def expected_gain(config: dict[str, Any]) -> float:
        change = str(config.get("change"))
        other = config.get("model")
        if change.startswith("strategy:model:") and other in req.family_scores and parent is not None and parent.score is not None:
            diff = req.family_scores[other] - parent.score
            lead = (diff if req.task.higher_is_better else -diff) / max(abs(parent.score), 1e-12)
            return max(0.01 * base, base + lead)
        n, mean = req.move_gains.get(f"{model} {change}", (0, 0.0))
        return max((n * mean + PRIOR_TRIES * base) / (n + PRIOR_TRIES), GAIN_FLOOR * base)

    def weigh(config: dict[str, Any]) -> float:
        try:
            seconds = costs.predict_s(config, fidelity)
        except KeyError:  # not a knowledge entry: no prediction, only the gain
            seconds = 1.0
        return expected_gain(config) / max(seconds, 1e-3)

    return weigh


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
        config, desc = mutate_params(config, entry, rng, avoid, weigh=gain_per_second(req, config["model"]))
    tiers = ("parameters", "features", "strategy")
    plan = f"Improve ({tiers[tier]}) node {parent.seq} ({entry.title}, score {parent.score}): {desc}."
    return config, plan


def _strategy_change(coder: "RecipeCoder", config: dict[str, Any], req: CoderRequest, rng: random.Random, avoid: set[str]) -> tuple[dict, str] | None:
    """Seed averaging (for a seeded model with one seed) or a model family the lineage has not
    used, keeping the feature blocks, drawn by expected gain per second (:func:`gain_per_second`);
    None when neither is left."""
    options = []
    if config.get("n_seeds", 1) == 1 and "strategy:seed_averaging" not in avoid and get_entry(config["model"]).recipe.seeded:
        options.append("seed_averaging")
    lineage_models = {n.config.get("model") for n in (req.parent, *req.lineage) if n is not None and n.config}
    for m in coder.applicable_models(req.profile):
        if m.id != config["model"] and f"strategy:model:{m.id}" not in avoid and m.id not in lineage_models:
            options.append(m.id)
    if not options:
        return None
    weigh = gain_per_second(req, config["model"])
    changed = [_strategy_config(config, option, req.profile) for option in options]
    weights = [weigh(c) for c, _ in changed]
    return rng.choices(changed, weights=weights)[0] if sum(weights) > 0 else rng.choice(changed)


def _strategy_config(config: dict[str, Any], option: str, profile: dict[str, Any]) -> tuple[dict, str]:
    """``config`` after strategy change ``option`` (``seed_averaging`` or a model entry id), and
    what changed."""
    if option == "seed_averaging":
        out = copy.deepcopy(config)
        out["n_seeds"] = 3
        out["change"] = "strategy:seed_averaging"
        return out, "average 3 seeds per fold (strategy.seed_averaging)"
    new = default_config(option, profile)
    new["features"] = dict(config["features"])
    new["change"] = f"strategy:model:{option}"
    return new, f"switch model family to {get_entry(option).title}, keeping the feature blocks"
