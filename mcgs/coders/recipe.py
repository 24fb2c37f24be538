"""The offline recipe coder: composes programs from the knowledge base's recipes.

A program is fully described by a small config (:mod:`mcgs.coders.recipe_config`: what it
holds, how it is rendered, the moves made on it). Each operator's module holds its own recipe
step, ``recipe_step(coder, request, rng) -> (config, plan)`` (DESIGN §5); this coder picks the
step for the request's operator, keeps the new config from repeating a node's, and renders it:

* **Draft** picks a model entry that fits the profile and that no other draft used yet (drafts
  differ in kind, not only in seed), from a family no draft used yet when one is left (ridge
  waits until every other family has a draft when lasso has one), with the default feature
  blocks.
* **Improve** escalates by tier: 0 changes one model parameter within its range (one not
  changed by a sibling), 1 toggles a feature block, 2 changes strategy (another model family or
  seed averaging).
* **Debug** maps failure classes to fixes: a timeout or memory error makes the program
  cheaper, a missing package switches the model family, anything else falls back to the
  nearest valid ancestor's config or to the cheapest applicable recipe.
* **Evolve** reads the branch's trajectory: every change that improved on its parent is
  re-applied to the branch best when the best lacks it; when none is left, it tries a change
  nobody on the branch tried.
* **Fusion** and **Aggregate** merge nodes: the strongest input's model and parameters, the
  union of all inputs' feature blocks, and the most seeds any input averaged.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any, Sequence

from mcgs.coders import ENGINE_KEYS, CoderAnswer, CoderRequest, config_key
from mcgs.coders.recipe_config import COST_PARAMS, FEATURE_ORDER, default_config, mutate_params, model_entries, render_program, toggle_feature
from mcgs.knowledge_base import KnowledgeEntry, get_entry
from mcgs.node import Operator
from mcgs.operators import RECIPE_FOREIGN, RECIPE_STEPS

__all__ = ["RecipeCoder", "render_program", "FEATURE_ORDER", "COST_PARAMS"]


class RecipeCoder:
    """Offline coder built from the knowledge base (no network, deterministic given a seed).

    Args:
        seed: Seed of the coder's own choices (mixed with each request's seed).
        models: Model entry ids the coder may use (default: every applicable model entry).

    Raises:
        KeyError: ``models`` names an unknown entry.
    """

    name = "recipe"

    def __init__(self, seed: int = 0, models: Sequence[str] | None = None):
        self.seed = seed
        self.models = tuple(models) if models else None
        for m in self.models or ():
            get_entry(m)

    def applicable_models(self, profile: dict[str, Any]) -> list[KnowledgeEntry]:
        """The model entries this coder may use on a data profile: the applicable ones, only
        interpretable ones when the task asks for it, narrowed to ``models`` when given.

        Raises:
            ValueError: the task asks for an interpretable model and no applicable entry is one.
        """
        entries = model_entries(profile)
        if (profile.get("constraints") or {}).get("interpretable"):
            entries = [e for e in entries if e.recipe.interpretable]
            if not entries:
                raise ValueError("the task asks for an interpretable model but no applicable knowledge entry is marked interpretable")
        allowed = [e for e in entries if self.models is None or e.id in self.models]
        return allowed or entries

    def cheapest(self, profile: dict[str, Any], exclude: str | None = None, max_priority: int | None = None) -> str:
        """The applicable model entry with the lowest relative cost (Debug's safe choice),
        optionally among entries at least as preferred as ``max_priority``."""
        entries = [e for e in self.applicable_models(profile) if e.id != exclude]
        if max_priority is not None:
            entries = [e for e in entries if e.recipe.priority <= max_priority] or entries
        entries = entries or self.applicable_models(profile)
        return min(entries, key=lambda e: (e.recipe.relative_cost, e.recipe.priority)).id

    # ------------------------------------------------------------------ public

    def write(self, request: CoderRequest) -> CoderAnswer:
        """Write a program for a Draft, Debug, Improve, Evolve, Fusion or Aggregate request: the
        operator module's ``recipe_step`` makes the config, rendered by
        :func:`~mcgs.coders.recipe_config.render_program`.

        Raises:
            ValueError: the request's operator has no recipe step (Ensemble, Code Review).
        """
        rng = random.Random(f"{self.seed}-{request.seed}-{request.operator.value}")
        foreign = RECIPE_FOREIGN[request.operator](request) if request.operator in RECIPE_FOREIGN else None
        if foreign:  # a baseline script or an LLM program: no recipe config to change
            request = dataclasses.replace(request, operator=Operator.DRAFT, parent=None, lineage=(), references=())
        step = RECIPE_STEPS.get(request.operator)
        if step is None:
            raise ValueError(f"the recipe coder cannot serve operator {request.operator.value!r}")
        config, plan = step(self, request, rng)
        config = {k: v for k, v in config.items() if k not in ENGINE_KEYS}  # about the node built on, not this one
        config, plan = self._novel(config, plan, request, rng)
        if foreign:
            plan = f"({foreign}; the recipe coder writes a fresh draft) {plan}"
        config["seed"] = request.seed
        model = get_entry(config["model"])
        title = f"mcgs candidate ({request.operator.value}): {model.title}"
        code, ids = render_program(config, title=title, plan=plan, profile=request.profile)
        return CoderAnswer(plan=plan, code=code, config=config, knowledge_ids=ids)

    # ------------------------------------------------------------------ configs

    #: attempts at a config no node has before the coder gives up and repeats one
    NOVELTY_ATTEMPTS = 12

    def _novel(self, config: dict[str, Any], plan: str, req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
        """``config`` unless a node of the graph already has it (``req.tried``); then one step
        from it that no node has: a parameter move, or, when every move lands on a known
        config, a feature block switched as well. The plan says which node it would have
        repeated.

        Why: Aggregate merges the same branch bests each time the search stagnates, and a
        feature switched on then off again (or a Debug that reverts to its parent) rebuilds a
        config the graph holds; the rerun costs a candidate's time for a known result (in the
        36 ablation runs of 2026-12-01, 88 of 849 nodes repeated an earlier node's config, 48
        with the identical score).
        """
        seen = req.tried.get(config_key(config) or "")
        if seen is None:
            return config, plan
        entry = get_entry(config["model"])
        tunable = any(name in config["params"] for name in entry.recipe.space)
        for attempt in range(self.NOVELTY_ATTEMPTS):
            out, desc = mutate_params(config, entry, rng, avoid=()) if tunable else (copy.deepcopy(config), "")
            if attempt >= self.NOVELTY_ATTEMPTS // 2 or not tunable:  # parameter moves alone keep landing on known configs
                switched = toggle_feature(out, req.profile, rng, avoid=())
                desc = ", and ".join(d for d in (desc, switched) if d)
            if config_key(out) not in req.tried:
                out["change"] = f"{config.get('change', req.operator.value)}+{out['change']}"
                return out, f"{plan} That program is node {seen}'s (up to its seed), so one step from it instead: {desc}."
        return config, plan

    def default_config(self, model_id: str, profile: dict[str, Any]) -> dict[str, Any]:
        """The default config of a model entry (:func:`mcgs.coders.recipe_config.default_config`)."""
        return default_config(model_id, profile)
