"""Fusion: merge a stagnant branch's best node with the best nodes of other branches (at most
``max_fusion_refs``), AutoMLGen's cross-branch fusion (DESIGN §4).

* **When** (:func:`propose`, graph policies only): selection reaches a valid node of a stagnant
  branch (:func:`mcgs.branches.stagnant_branch_at`) whose best node has room for a graph
  child, another branch has a valid node, and the best node has no more Fusion children than
  Evolve children (the two alternate; Fusion goes first).
* **Request** (:func:`build_request`): the branch best as parent, the other branches' bests
  (best first) as references.
* **Edges** (:func:`edges`): a ``fuses`` edge from the primary parent and from each reference,
  so a Fusion node has at least two incoming ``fuses`` edges and its reward is credited back
  to the branches it drew on.
* **Prompt**: ``operators/prompts/fusion.j2``.
* **Recipe step** (:func:`recipe_step`, shared with Aggregate): the strongest input's model and
  parameters, the union of all inputs' feature blocks, and the most seeds any input averaged
  that fit in half the time limit; when that would copy the strongest input, seed averaging or
  a new feature block or parameter step instead.
"""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any

import networkx as nx

from mcgs.branches import Expansion, good_branches, stagnant_branch_at
from mcgs.coders import CoderRequest
from mcgs.coders.recipe_config import mutate_params, toggle_feature, no_recipe_input, written_by_recipe
from mcgs.direction import best_first
from mcgs.graph import branch_of
from mcgs.knowledge_base import get_entry
from mcgs.node import EdgeKind, Operator
from mcgs.operators.context import OperatorContext
from mcgs.settings import SearchSettings

if TYPE_CHECKING:
    from mcgs.coders.recipe import RecipeCoder

#: The operator this module implements.
OPERATOR = Operator.FUSION
#: The LLM prompt template of this operator, in ``operators/prompts/``.
PROMPT = "fusion.j2"


def propose(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    """A fusion of the branch best of ``v`` with other branches' bests, when the module's
    *When* holds; else None."""
    st = stagnant_branch_at(g, v, s, higher_is_better)
    if st is None or st.n_fusion > st.n_evolve:
        return None
    others = [b for b in good_branches(g, higher_is_better) if branch_of(g, b.id) != st.head][: s.max_fusion_refs]
    if not others:
        return None
    refs = tuple(o.id for o in others)
    return Expansion(st.best.id, Operator.FUSION, reason=f"fusion: branch stagnant for {st.since} nodes; merge with the best of {len(refs)} other branch(es)", references=refs)


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a fusion of ``exp.parent_id`` with the nodes in ``exp.references`` (best first)."""
    return ctx.request(exp, Operator.FUSION)


def edges(exp: Expansion) -> list[tuple[int, EdgeKind, dict]]:
    """A ``fuses`` edge from the primary parent and from each reference (each input once)."""
    return [(i, EdgeKind.FUSES, {}) for i in dict.fromkeys([exp.parent_id, *exp.references])]


def _inputs(req: CoderRequest) -> tuple:
    """What the request merges: the parent (for Fusion) and the references."""
    return ((req.parent,) if req.operator is Operator.FUSION else ()) + req.references


def recipe_foreign(req: CoderRequest) -> str | None:
    """Why the recipe coder cannot merge the request's inputs (none is valid with a recipe
    config), or None."""
    return no_recipe_input(_inputs(req))


def recipe_step(coder: "RecipeCoder", req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
    """The recipe coder's merge of the request's inputs (the parent, for Fusion, and the
    references): ``(config, plan)``.

    Raises:
        ValueError: no input is valid with a recipe config.
    """
    inputs = [n for n in _inputs(req) if written_by_recipe(n) and n.is_valid]
    if not inputs:
        raise ValueError(f"{req.operator.value} needs at least one valid input with a recipe config")
    strongest = min(inputs, key=lambda n: (best_first(n.score, req.task.higher_is_better), n.seq))
    config = copy.deepcopy(strongest.config)
    for n in inputs:
        for f, on in n.config["features"].items():
            config["features"][f] = bool(config["features"].get(f)) or bool(on)
        config["n_seeds"] = max(config.get("n_seeds", 1), n.config.get("n_seeds", 1))
    # Seeds that fit: the strongest input's time per seed, against half the time limit.
    per_seed = (strongest.runtime_s or 0.0) / max(1, strongest.config.get("n_seeds", 1))
    fit = int(0.5 * req.per_run_timeout_s // per_seed) if per_seed > 0 else 3
    seeded = get_entry(config["model"]).recipe.seeded
    config["n_seeds"] = max(1, min(config["n_seeds"], fit)) if seeded else 1
    extra = ""
    if config["features"] == strongest.config["features"] and config["n_seeds"] == strongest.config.get("n_seeds", 1):
        # nothing to merge: the inputs share every block. Average seeds instead of copying,
        # when the model depends on its seed and 2 fit in the time limit; otherwise add a
        # block no input has tried (a copy would only repeat the strongest input's run).
        if seeded and fit >= 2:
            config["n_seeds"] = min(3, fit)
            extra = f"; the inputs share every feature block, so average {config['n_seeds']} seeds per fold"
        else:
            why = "the model does not depend on its seed" if not seeded else f"one seed takes {per_seed:.0f}s"
            tried = {f"feature:{f}" for n in inputs for f, on in n.config["features"].items() if on}
            toggled = toggle_feature(config, req.profile, rng, tried)
            if toggled is not None:
                extra = f"; the inputs share every feature block and {why}, so {toggled}"
            else:  # every block tried too: a parameter step rather than a copy of the strongest input
                config, step = mutate_params(config, get_entry(config["model"]), rng, set())
                extra = f"; the inputs share every feature block and {why}, so {step}"
    config["change"] = f"{req.operator.value}:merge"
    on = sorted(f for f, v in config["features"].items() if v)
    names = ", ".join(f"node {n.seq} ({get_entry(n.config['model']).title.split(' (')[0]}, {n.score:.6g})" for n in inputs)
    plan = (
        f"{req.operator.value.capitalize()} of {names}: keep the strongest model (node {strongest.seq}, "
        f"{get_entry(config['model']).title}) with its parameters, and the union of the inputs' feature blocks "
        f"({', '.join(on) or 'none'}){extra}."
    )
    return config, plan
