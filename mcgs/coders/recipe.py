"""The offline recipe coder: composes programs from the knowledge base's recipes.

A program is fully described by a small config::

    {"model": "model.lightgbm", "params": {...}, "features": {"split_compound": true, ...},
     "n_seeds": 1, "log_target": false, "seed": 0, "change": "what this node changed"}

and rendered from ``knowledge_base/recipes/solution.py.j2`` plus the model's and the enabled
feature blocks' templates. Operators act on the config (DESIGN §5):

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
import re
from typing import Any, Sequence

from mcgs.coders import CoderAnswer, CoderRequest, config_key
from mcgs.contract import CONTRACT_VERSION
from mcgs.direction import best_first
from mcgs.knowledge_base import KnowledgeEntry, get_entry, rank_entries, retrieve, template_environment
from mcgs.node import FrozenNode, NodeState, Operator
from mcgs.profile import MAX_CATEGORIES, TEXT_MIN_WORDS

__all__ = ["RecipeCoder", "render_program"]

# Feature blocks in the order they run; each is controlled by a config flag.
FEATURE_ORDER = (
    "datetime_parts", "cyclical_time", "covariate_lags", "text_stats",
    "split_compound", "count_encoding", "row_aggregates", "power_transform", "missing_indicators",
)
# Parameters that scale a model's training cost linearly (halved by Debug on timeouts).
COST_PARAMS = ("n_estimators", "iterations", "max_iter")


def _feature_entries(profile: dict[str, Any]) -> dict[str, KnowledgeEntry]:
    return {e.recipe.flag: e for e in retrieve(profile, recipe_kind="feature") if e.recipe.flag}


def _model_entries(profile: dict[str, Any]) -> list[KnowledgeEntry]:
    return retrieve(profile, recipe_kind="model")


def _family(entry: KnowledgeEntry) -> str:
    """The model family an entry belongs to (its own id unless it declares one)."""
    return (entry.recipe.family if entry.recipe else None) or entry.id


def _fmt(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.4g}")
    return v


def render_program(config: dict[str, Any], *, title: str, plan: str, profile: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """Render a config into a standalone ``solution.py``.

    Returns:
        ``(code, knowledge_ids)``.

    Raises:
        KeyError: unknown model entry id in the config.
    """
    model = get_entry(config["model"])
    feats = _feature_entries(profile)
    blocks = ["fe_base.py.j2"]
    ids = ["data.column_types"]
    for flag in FEATURE_ORDER:
        if config["features"].get(flag) and flag in feats:
            blocks.append(feats[flag].recipe.template)
            ids.append(feats[flag].id)
    ids += [model.id, "strategy.kfold_oof"]
    if config.get("n_seeds", 1) > 1:
        ids.append("strategy.seed_averaging")
    if config.get("log_target"):
        ids.append("strategy.log_target")
    params = {k: _fmt(v) for k, v in config["params"].items()}
    code = template_environment().get_template("solution.py.j2").render(
        title=title,
        plan=plan,
        knowledge_ids=ids,
        contract_version=CONTRACT_VERSION,
        seed=int(config.get("seed", 0)),
        n_seeds=int(config.get("n_seeds", 1)),
        log_target=bool(config.get("log_target")),
        feature_blocks=blocks,
        model_template=model.recipe.template,
        params=repr(params),
        max_categories=MAX_CATEGORIES,
        text_min_words=TEXT_MIN_WORDS,
    )
    return code, tuple(ids)


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

    def _models(self, profile: dict[str, Any]) -> list[KnowledgeEntry]:
        entries = _model_entries(profile)
        if (profile.get("constraints") or {}).get("interpretable"):
            entries = [e for e in entries if e.recipe.interpretable]
            if not entries:
                raise ValueError("the task asks for an interpretable model but no applicable knowledge entry is marked interpretable")
        allowed = [e for e in entries if self.models is None or e.id in self.models]
        return allowed or entries

    @staticmethod
    def _expected_fit_s(entry: KnowledgeEntry, profile: dict[str, Any]) -> float:
        """A rough prior of a draft's run time, seconds: ``relative_cost`` x 4 s per 5 000
        training rows (at least one unit). Calibrated on this project's measurements with 2
        threads: LightGBM (cost 1) drafts of spaceship-titanic's 8 693 rows take 7-11 s and
        CatBoost (cost 10) 43-48 s (docs/results/throughput.md). Only used to draft slow
        families after fast ones when the per-candidate limit is short."""
        return entry.recipe.relative_cost * 4.0 * max(1.0, float(profile.get("n_train") or 0) / 5000.0)

    def _cheapest(self, profile: dict[str, Any], exclude: str | None = None, max_priority: int | None = None) -> str:
        """The applicable model entry with the lowest relative cost (Debug's safe choice),
        optionally among entries at least as preferred as ``max_priority``."""
        entries = [e for e in self._models(profile) if e.id != exclude]
        if max_priority is not None:
            entries = [e for e in entries if e.recipe.priority <= max_priority] or entries
        entries = entries or self._models(profile)
        return min(entries, key=lambda e: (e.recipe.relative_cost, e.recipe.priority)).id

    # ------------------------------------------------------------------ public

    def write(self, request: CoderRequest) -> CoderAnswer:
        """Write a program for a Draft, Debug or Improve request."""
        rng = random.Random(f"{self.seed}-{request.seed}-{request.operator.value}")
        foreign = _foreign_parent(request)
        if foreign:  # a baseline script or an LLM program: no recipe config to change
            request = dataclasses.replace(request, operator=Operator.DRAFT, parent=None, lineage=(), references=())
        if request.operator is Operator.DRAFT:
            config, plan = self._draft(request, rng)
        elif request.operator is Operator.DEBUG:
            config, plan = self._debug(request, rng)
        elif request.operator is Operator.IMPROVE:
            config, plan = self._improve(request, rng)
        elif request.operator is Operator.EVOLVE:
            config, plan = self._evolve(request, rng)
        elif request.operator in (Operator.FUSION, Operator.AGGREGATE):
            config, plan = self._merge(request, rng)
        else:
            raise ValueError(f"the recipe coder cannot serve operator {request.operator.value!r}")
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
            out, desc = self._mutate_params(config, entry, rng, avoid=()) if tunable else (copy.deepcopy(config), "")
            if attempt >= self.NOVELTY_ATTEMPTS // 2 or not tunable:  # parameter moves alone keep landing on known configs
                switched = self._toggle_feature(out, req.profile, rng, avoid=())
                desc = ", and ".join(d for d in (desc, switched) if d)
            if config_key(out) not in req.tried:
                out["change"] = f"{config.get('change', req.operator.value)}+{out['change']}"
                return out, f"{plan} That program is node {seen}'s (up to its seed), so one step from it instead: {desc}."
        return config, plan

    def default_config(self, model_id: str, profile: dict[str, Any]) -> dict[str, Any]:
        """The default config of a model entry: its default params and default feature blocks."""
        entry = get_entry(model_id)
        feats = _feature_entries(profile)
        return {
            "model": model_id,
            "params": dict(entry.recipe.params),
            "features": {flag: bool(feats[flag].recipe.default) if flag in feats else False for flag in FEATURE_ORDER},
            "n_seeds": 1,
            "log_target": profile.get("metric") in ("rmsle", "mean_column_rmsle"),
            "change": "draft",
        }

    def _draft(self, req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
        models = self._models(req.profile)
        used = [s.config.get("model") for s in req.siblings if s.operator is Operator.DRAFT]
        unused = [m for m in models if m.id not in used]
        drafted_families = {_family(m) for m in models if m.id in used}
        # Under a short time limit, entries expected to need more than half of it are drafted
        # last; otherwise a family with no draft yet comes before a second member of a drafted
        # one (ridge after lasso): the ensemble needs members that err differently.
        unused.sort(key=lambda m: (self._expected_fit_s(m, req.profile) > 0.5 * req.per_run_timeout_s, _family(m) in drafted_families))
        entry = unused[0] if unused else rng.choice(models)
        config = self.default_config(entry.id, req.profile)
        if not unused:
            # every family has a draft already: vary it so the new draft is not a copy
            config = self._mutate_params(config, entry, rng, avoid=())[0]
        on = [f for f, v in config["features"].items() if v]
        advice = [e.title for e, _ in rank_entries(req.profile, req.task.description, top_k=12) if e.level != "model"][:3]
        plan = (
            f"Draft: {entry.title} with default parameters on engineered features "
            f"({', '.join(on) or 'raw columns only'}), trained with the task's folds. {entry.guidance.strip()}"
            + (f" Knowledge that applies to this data: {'; '.join(advice)}." if advice else "")
        )
        return config, plan

    @staticmethod
    def _changes(nodes: tuple[FrozenNode, ...]) -> set[str]:
        return {str(n.config.get("change", "")) for n in nodes}

    def _mutate_params(self, config, entry: KnowledgeEntry, rng: random.Random, avoid: set[str] | tuple) -> tuple[dict, str]:
        space = entry.recipe.space
        names = [n for n in space if n in config["params"]]
        options = [(n, d) for n in names for d in ("up", "down")]
        fresh = [o for o in options if f"param:{o[0]}:{o[1]}" not in avoid] or options
        name, direction = rng.choice(fresh)
        rng_def = space[name]
        old = config["params"][name]
        if rng_def.log:
            factor = rng.uniform(1.4, 2.2)
            new = old * factor if direction == "up" else old / factor
        else:
            step = (rng_def.high - rng_def.low) * rng.uniform(0.15, 0.3)
            new = old + step if direction == "up" else old - step
        new = min(max(new, rng_def.low), rng_def.high)
        if rng_def.int:
            new = int(round(new))
        else:
            new = _fmt(new)
        out = copy.deepcopy(config)
        out["params"][name] = new
        # Keep boosting's learning rate and rounds in step: more rounds with a smaller rate.
        if name == "learning_rate":
            for cost in COST_PARAMS:
                if cost in out["params"] and cost in space:
                    r = space[cost]
                    scaled = out["params"][cost] * (old / new) if new else out["params"][cost]
                    out["params"][cost] = int(min(max(round(scaled), r.low), r.high))
        out["change"] = f"param:{name}:{direction}"
        return out, f"change {name} {old} -> {new}"

    def _improve(self, req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
        parent = req.parent
        assert parent is not None
        config = copy.deepcopy(parent.config)
        entry = get_entry(config["model"])
        avoid = self._changes(req.siblings)
        tier = req.tier
        desc = ""
        if tier == 2:
            out = self._strategy_change(config, req, rng, avoid)
            if out is not None:
                config, desc = out
            else:
                tier = 1
        if tier == 1:
            toggled = self._toggle_feature(config, req.profile, rng, avoid)
            if toggled is not None:
                desc = toggled
            else:
                tier = 0
        if tier == 0:
            config, desc = self._mutate_params(config, entry, rng, avoid)
        tiers = ("parameters", "features", "strategy")
        plan = f"Improve ({tiers[tier]}) node {parent.seq} ({entry.title}, score {parent.score}): {desc}."
        return config, plan

    @staticmethod
    def _toggle_feature(config: dict, profile: dict[str, Any], rng: random.Random, avoid) -> str | None:
        """Switch one applicable feature block not toggled in ``avoid`` (in place); returns what
        was done, or None when every block was tried."""
        feats = _feature_entries(profile)
        toggles = [f for f in FEATURE_ORDER if f in feats and f"feature:{f}" not in avoid]
        if not toggles:
            return None
        flag = rng.choice(toggles)
        config["features"][flag] = not config["features"].get(flag, False)
        config["change"] = f"feature:{flag}"
        return f"{'add' if config['features'][flag] else 'remove'} feature block {feats[flag].title!r}"

    def _strategy_change(self, config, req: CoderRequest, rng: random.Random, avoid) -> tuple[dict, str] | None:
        options = []
        if config.get("n_seeds", 1) == 1 and "strategy:seed_averaging" not in avoid and get_entry(config["model"]).recipe.seeded:
            options.append("seed_averaging")
        lineage_models = {n.config.get("model") for n in (req.parent, *req.lineage) if n is not None and n.config}
        for m in self._models(req.profile):
            if m.id != config["model"] and f"strategy:model:{m.id}" not in avoid and m.id not in lineage_models:
                options.append(m.id)
        if not options:
            return None
        choice = rng.choice(options)
        if choice == "seed_averaging":
            config["n_seeds"] = 3
            config["change"] = "strategy:seed_averaging"
            return config, "average 3 seeds per fold (strategy.seed_averaging)"
        new = self.default_config(choice, req.profile)
        new["features"] = dict(config["features"])
        new["change"] = f"strategy:model:{choice}"
        return new, f"switch model family to {get_entry(choice).title}, keeping the feature blocks"

    def _evolve(self, req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
        best = req.parent
        assert best is not None
        config = copy.deepcopy(best.config)
        by_id = {n.id: n for n in (best, *req.references)}
        helped = []  # (node, parent) pairs where the node's change beat its parent
        for n in req.references:
            p = by_id.get(n.parent_id)
            if n.is_valid and p is not None and p.is_valid and n.config and p.config:
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
        tried = self._changes(req.references)
        if applied:
            config["change"] = "evolve:reapply"
            desc = "re-apply the changes that helped elsewhere on the branch: " + ", ".join(applied)
        else:
            toggled = self._toggle_feature(config, req.profile, rng, tried)
            if toggled is not None:
                desc = f"no change on the branch helped; try what nobody tried: {toggled}"
            else:
                config, change = self._mutate_params(config, get_entry(config["model"]), rng, avoid=tried)
                desc = f"no change on the branch helped; untried parameter move: {change}"
        n_valid = sum(1 for n in req.references if n.is_valid)
        plan = f"Evolve node {best.seq} (branch best, score {best.score}) from its branch's {len(req.references)} other nodes ({n_valid} valid, {len(helped)} improved on their parent): {desc}."
        return config, plan

    def _merge(self, req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
        inputs = [n for n in ((req.parent,) if req.operator is Operator.FUSION else ()) + req.references if n is not None and n.is_valid and n.config.get("model")]
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
                toggled = self._toggle_feature(config, req.profile, rng, tried)
                if toggled is not None:
                    extra = f"; the inputs share every feature block and {why}, so {toggled}"
                else:  # every block tried too: a parameter step rather than a copy of the strongest input
                    config, step = self._mutate_params(config, get_entry(config["model"]), rng, set())
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

    def _debug(self, req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
        parent = req.parent
        assert parent is not None
        config = copy.deepcopy(parent.config) if parent.config else self.default_config(self._cheapest(req.profile), req.profile)
        error = (parent.error or "") + "\n" + (parent.stderr_tail or "")[-2000:]
        if parent.state in (NodeState.TIMEOUT, NodeState.OOM, NodeState.DISK, NodeState.PROCESS_LIMIT):
            for name in COST_PARAMS:
                if name in config["params"]:
                    config["params"][name] = max(50, int(config["params"][name] * 0.5))
            config["n_seeds"] = 1
            entry = get_entry(config["model"])
            if entry.recipe.relative_cost > 2.0:
                cheaper = self._cheapest(req.profile, exclude=entry.id, max_priority=entry.recipe.priority)
                config = self.default_config(cheaper, req.profile) | {"features": config["features"]}
            config["change"] = f"debug:{parent.state.value}"
            return config, f"Debug {parent.state.value} of node {parent.seq}: make the program cheaper (half the boosting rounds, one seed, a cheaper model family if needed)."
        if re.search(r"ModuleNotFoundError|ImportError", error):
            fallback = self._cheapest(req.profile, exclude=config.get("model"))
            new = self.default_config(fallback, req.profile)
            new["change"] = "debug:import"
            return new, f"Debug node {parent.seq}: a package is missing ({_last_line(error)}); switch to {get_entry(fallback).title}."
        good = next((n for n in req.lineage if n.state is NodeState.VALID and n.config), None)
        if good is not None:
            new = copy.deepcopy(good.config)
            new["change"] = "debug:revert"
            return new, f"Debug node {parent.seq} ({_last_line(error)}): revert to the last valid config in its lineage (node {good.seq})."
        new = self.default_config(self._cheapest(req.profile), req.profile)
        new["features"] = {f: False for f in FEATURE_ORDER}
        new["change"] = "debug:safe"
        return new, f"Debug node {parent.seq} ({_last_line(error)}): fall back to the cheapest recipe ({get_entry(new['model']).title}) on the raw columns."


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "unknown error"



def _foreign_parent(req: CoderRequest) -> str | None:
    """Why the recipe coder cannot build on the request's inputs (they are programs it did not
    write: a baseline script, an LLM's program), or None."""
    readable = lambda n: n is not None and bool(n.config.get("model"))  # noqa: E731
    if req.operator in (Operator.DEBUG, Operator.IMPROVE, Operator.EVOLVE) and not readable(req.parent):
        return f"node {req.parent.seq if req.parent else '?'} was not written by the recipe coder"
    if req.operator in (Operator.FUSION, Operator.AGGREGATE):
        inputs = ((req.parent,) if req.operator is Operator.FUSION else ()) + req.references
        if not any(readable(n) and n.is_valid for n in inputs):
            return "none of the inputs was written by the recipe coder"
    return None
