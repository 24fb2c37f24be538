"""Draft: a new branch from the root, from a knowledge entry that no other draft used; or, once,
the starter program a user gave (``--baseline``, MLAgentBench mode: :func:`run_baseline`).

* **When** (:func:`propose`): at the root, until ``num_drafts`` drafts exist (interrupted ones
  do not count). A UCT policy also drafts when every branch is exhausted.
* **Request** (:func:`build_request`): no parent program; the existing drafts are passed as
  siblings so the coder diversifies.
* **Edges**: ``derives`` from the root only.
* **Prompt**: ``operators/prompts/draft.j2``.
* **Recipe step** (:func:`recipe_step`): a model entry that fits the profile and that no draft
  used yet (drafts differ in kind, not only in seed), from a family no draft used yet when one
  is left (ridge waits until every other family has a draft when lasso has one), with the
  default feature blocks; on data where the cost model expects the default program to take over
  a third of the candidate time limit, with fewer rounds or trees (:func:`affordable`).
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import TYPE_CHECKING, Any

import networkx as nx

from mcgs.branches import Expansion, live_children
from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.coders.recipe_config import COST_PARAMS, TABLE_BASE, default_config, family, feature_entries, mutate_params
from mcgs.cost_model import OVERHEAD_S, CostModel, cost_model_from_nodes
from mcgs.experience import UNTRIED_VALUE
from mcgs.graph import node, nodes_by_seq
from mcgs.knowledge_base import KnowledgeEntry, rank_entries
from mcgs.node import NodeState, Operator
from mcgs.operators.context import OperatorContext
from mcgs.settings import SearchSettings

if TYPE_CHECKING:
    from mcgs.coders.recipe import RecipeCoder

#: The operator this module implements.
OPERATOR = Operator.DRAFT
#: The LLM prompt template of this operator, in ``operators/prompts/``.
PROMPT = "draft.j2"


def propose(g: nx.DiGraph, v: int, s: SearchSettings, higher_is_better: bool) -> Expansion | None:
    """A draft when ``v`` is the root and fewer than ``s.num_drafts`` live drafts exist, else None."""
    if node(g, v).state is not NodeState.ROOT:
        return None
    drafts = [c for c in live_children(g, v) if node(g, c).operator is Operator.DRAFT]
    if len(drafts) < s.num_drafts:
        return Expansion(v, Operator.DRAFT, reason=f"draft {len(drafts) + 1} of {s.num_drafts}")
    return None


#: A draft whose default program the cost model expects to take more than this share of the
#: candidate time limit is made cheaper (:func:`affordable`). Ours: a third leaves room for a
#: prediction off by a factor of three before its run is cut at the limit.
DRAFT_LIMIT_SHARE = 1 / 3


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a draft; the existing drafts are passed as siblings so the coder diversifies,
    with the run's calibrated cost model (:func:`affordable`)."""
    req = ctx.request(exp, Operator.DRAFT, with_parent=False)
    return dataclasses.replace(req, costs=cost_model_from_nodes(ctx.profile, ctx.task.validation, nodes_by_seq(ctx.graph),
                                                        ctx.experience.cost_offsets if ctx.experience else None))


def affordable(config: dict[str, Any], entry: KnowledgeEntry, costs: CostModel, limit_s: float) -> tuple[dict[str, Any], str]:
    """``config`` made cheap enough for its time limit: when the cost model predicts more than
    :data:`DRAFT_LIMIT_SHARE` of ``limit_s`` (seconds), its rounds or trees (``n_estimators``,
    ``iterations``, ``max_iter``) are cut in proportion (when by more than a tenth), not below their search space's low end,
    and a boosting learning rate is raised by the same factor (within its range) so the
    ensemble learns as much per program (FLAML likewise starts from low-cost configurations:
    Wu et al., *Frugal Optimization for Cost-related Hyperparameters*, AAAI 2021). An image
    network's config is left as it is: its program cuts its own batches to its time limit.

    Returns:
        ``(config, note)``: a copy of ``config`` when changed, else ``config`` itself; ``note``
        says what changed and why ("" when nothing did).
    """
    if entry.recipe is not None and entry.recipe.base != TABLE_BASE:
        return config, ""  # a network's program sizes its own training to its time limit (MCGS_TIME_LIMIT_S)
    predicted = costs.predict_s(config)
    target = DRAFT_LIMIT_SHARE * limit_s
    space = entry.recipe.space if entry.recipe else {}
    params = config.get("params", {})
    name = next((p for p in COST_PARAMS if p in params and p in space), None)
    if predicted <= target or name is None or predicted <= OVERHEAD_S:
        return config, ""
    factor = max(0.0, target - OVERHEAD_S) / (predicted - OVERHEAD_S)
    old = params[name]
    new = max(int(space[name].low), int(round(old * factor)))
    if new > 0.9 * old:  # a cut of under a tenth is not worth a weaker learning rate schedule
        return config, ""
    out = copy.deepcopy(config)
    out["params"][name] = new
    note = f"{name} {old} -> {new}"
    if "learning_rate" in params and "learning_rate" in space:
        rate = min(space["learning_rate"].high, params["learning_rate"] * old / new)
        out["params"]["learning_rate"] = float(f"{rate:.4g}")
        note += f", learning_rate {params['learning_rate']} -> {out['params']['learning_rate']}"
    return out, (f" Made cheaper for this data ({note}): the cost model predicts {predicted:.0f}s for the defaults "
                 f"against a limit of {limit_s:.0f}s per candidate.")


#: Rescue drafts a run makes at most (:func:`rescue_answer`), each with another model entry.
RESCUE_TRIES = 2


def rescue_answer(search, g: nx.DiGraph, seed: int) -> CoderAnswer | None:
    """A rescue draft when one is due, else None.

    Due once the share ``settings.rescue_at`` of the wall budget is spent while the run has no
    valid full-fidelity node and none running that may yet be one: then the recipe coder
    (offline, trusted) writes the default program of the model entry the run's calibrated cost
    model predicts cheapest, among the entries no rescue tried and none of whose nodes timed out,
    made cheap enough for the time limit (:func:`affordable`); at most :data:`RESCUE_TRIES`
    times. A run whose coder keeps failing (an LLM's broken programs, drafts too slow for a short
    budget) still hands in a submission; the plan says it is a rescue, and ``config.rescue`` marks it.

    Args:
        search: The search.
        g: Its graph now.
        seed: The new node's seed (``config.seed``).
    """
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.coders.recipe_config import render_program
    from mcgs.cost_model import run_cost_model

    nodes = [n for n in nodes_by_seq(g) if n.parent_id is not None]
    if (search.clock.progress < search.settings.rescue_at or search.settings.rescue_at >= 1
            or any(n.is_valid and n.full_fidelity or not n.state.is_finished() for n in nodes)):
        return None
    tried = {n.config.get("model") for n in nodes if n.config.get("rescue")}
    if len(tried) >= RESCUE_TRIES:
        return None
    timed_out = {n.config.get("model") for n in nodes if n.state is NodeState.TIMEOUT}
    entries = [e for e in RecipeCoder(seed=search.settings.seed, models=search.settings.recipe_models).applicable_models(search.profile)
               if e.id not in tried]
    entries = [e for e in entries if e.id not in timed_out] or entries
    if not entries:
        return None
    costs, limit = run_cost_model(search), search.budget.node_timeout()
    entry = min(entries, key=lambda e: costs.predict_s(default_config(e.id, search.profile)))
    config, cheaper = affordable(default_config(entry.id, search.profile), entry, costs, limit)
    config = {**config, "rescue": True, "seed": seed, "change": "rescue"}
    finished = sum(1 for n in nodes if n.state.is_finished())
    plan = (f"Rescue draft: {search.settings.rescue_at:.0%} of the budget is spent and none of the {finished} nodes so far is "
            f"valid at full fidelity, so the recipe coder writes its cheapest program here, {entry.title} with "
            f"default parameters (predicted {costs.predict_s(config):.0f}s against a limit of {limit:.0f}s).{cheaper}")
    code, ids = render_program(config, title=f"mcgs candidate (rescue draft): {entry.title}", plan=plan, profile=search.profile)
    return CoderAnswer(plan=plan, code=code, config=config, knowledge_ids=ids)


def recipe_step(coder: "RecipeCoder", req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
    """The recipe coder's draft: ``(config, plan)``.

    Under a short time limit, entries whose program the cost model expects to need more than
    half of it even when made cheaper (:func:`affordable`) are drafted last; with an experience
    (:mod:`mcgs.experience`), entries come in the order of their family's value on similar data
    (:data:`~mcgs.experience.UNTRIED_VALUE` for a family no similar run tried); otherwise a family
    with no draft yet comes before a second member of a drafted one: the ensemble needs members
    that err differently. Once every entry has a draft, a random one is drafted with one parameter moved.
    """
    models = coder.applicable_models(req.profile)
    used = [s.config.get("model") for s in req.siblings if s.operator is Operator.DRAFT]
    unused = [m for m in models if m.id not in used]
    drafted_families = {family(m) for m in models if m.id in used}
    costs = req.costs if req.costs is not None else CostModel.for_task(req.profile, req.task.validation)
    limit = req.per_run_timeout_s
    exp = req.experience
    unused.sort(key=lambda m: (costs.predict_s(affordable(default_config(m.id, req.profile), m, costs, limit)[0]) > 0.5 * limit,
                               -exp.family_ranks.get(m.id, UNTRIED_VALUE) if exp else 0.0, family(m) in drafted_families))
    entry = unused[0] if unused else rng.choice(models)
    config, learned = from_experience(default_config(entry.id, req.profile), entry, exp, req.profile) if unused else (default_config(entry.id, req.profile), "")
    if not unused:
        # every family has a draft already: vary it so the new draft is not a copy
        config = mutate_params(config, entry, rng, avoid=())[0]
    config, cheaper = affordable(config, entry, costs, limit)
    on = [f for f, v in config["features"].items() if v]
    advice = [e.title for e, _ in rank_entries(req.profile, req.task.description, top_k=12) if e.level != "model"][:3]
    if req.task.forecast is not None:
        how = "on the look-back window of every input series, fitted on the training rows and scored on the validation windows"
    else:
        how = f"on engineered features ({', '.join(on) or 'raw columns only'}), trained with the task's folds"
    plan = (
        f"Draft: {entry.title} with default parameters {how}. {entry.guidance.strip()}"
        + (f" Knowledge that applies to this data: {'; '.join(advice)}." if advice else "")
        + learned + cheaper
    )
    return config, plan


def from_experience(config: dict[str, Any], entry: KnowledgeEntry, experience, profile: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``config`` started from the configuration ``entry`` won with in the nearest earlier run on
    similar data (:class:`mcgs.experience.Experience`: FLAML's zero-shot portfolio idea): its
    parameters that ``entry``'s search space knows, clipped to their ranges, and its feature
    blocks that this data offers.

    Returns:
        ``(config, note)``: the config (``config`` itself when there is nothing to take or it
        won with the defaults) and a sentence for the plan ("" when no earlier run tried it).
    """
    learned = (experience.configs.get(entry.id) if experience is not None else None) or {}
    if not learned:
        return config, ""
    out = copy.deepcopy(config)
    space = entry.recipe.space if entry.recipe else {}
    taken = []
    for name, value in learned.get("params", {}).items():
        if name in space and isinstance(value, (int, float)) and not isinstance(value, bool):
            r = space[name]
            value = min(max(value, r.low), r.high)
            out["params"][name] = int(round(value)) if r.int else float(value)
            taken.append(f"{name}={out['params'][name]}")
        elif name in out["params"] and type(value) is type(out["params"][name]):
            out["params"][name] = value
            taken.append(f"{name}={value}")
    offered = feature_entries(profile)
    for flag, on in learned.get("features", {}).items():
        if flag in offered and flag in out["features"] and isinstance(on, bool):
            out["features"][flag] = on
    rank = experience.family_ranks.get(entry.id)
    if out == config:
        return config, (" Earlier runs on similar data ranked it" + (f" {rank:.2f}" if rank is not None else "")
                        + " (1 = their best) with this default configuration.")
    return out, (" Started from the configuration it won with on similar data in earlier runs"
                 + (f" (rank {rank:.2f} there)" if rank is not None else "") + f": {', '.join(taken[:8]) or 'feature blocks'}.")


def run_baseline(search) -> None:
    """Run ``RUN_DIR/baseline.py`` (given with ``baseline=``) as the first draft, once.

    The starter program becomes a root-level node (operator draft, ``config.baseline``) so the
    search builds from it: it is reviewed, run and scored like any candidate, and counts as one
    of the drafts (MLAgentBench, Huang et al. 2024, §2: the agent starts from a baseline program
    and is judged by its improvement over it).
    """
    from mcgs.execution import execute
    from mcgs.operators.code_review import review_program
    from mcgs.run_folder import BASELINE_NAME
    from mcgs.verdicts import reject

    path = search.run_dir / BASELINE_NAME
    if not path.is_file() or any(n.config.get("baseline") and n.state.is_finished() for n in search.nodes()):
        return
    review = review_program(path.read_text(), train_only_columns=search.profile.get("train_only_columns", ()))
    root = next(n for n in search.nodes() if n.parent_id is None)
    node = search.storage.add_node(
        search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="[baseline] the starter program given with --baseline",
        code=review.code, config={"baseline": True, "author": "baseline"}, review=review.as_dict(),
        owner=search.owner, lease_s=search.settings.lease_s,
    )
    if review.rejected:
        done = reject(search, node, review)
    else:
        done = execute(search, node, search.budget.node_timeout(), seed=search.settings.seed)
    score = f" {search.task.metric} {done.score:.6g}" if done.score is not None else ""
    search.say(f"baseline: {done.state.value}{score}" + (f" ({done.error})" if done.error else ""))
