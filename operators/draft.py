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
  default feature blocks.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import networkx as nx

from mcgs.branches import Expansion, live_children
from mcgs.coders import CoderRequest
from mcgs.coders.recipe_config import default_config, family, mutate_params
from mcgs.cost_model import CostModel
from mcgs.graph import node
from mcgs.knowledge_base import rank_entries
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


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a draft; the existing drafts are passed as siblings so the coder diversifies."""
    return ctx.request(exp, Operator.DRAFT, with_parent=False)


def recipe_step(coder: "RecipeCoder", req: CoderRequest, rng: random.Random) -> tuple[dict[str, Any], str]:
    """The recipe coder's draft: ``(config, plan)``.

    Under a short time limit, entries whose default program the cost model expects to need more
    than half of it are drafted last (:meth:`mcgs.cost_model.CostModel.prior_s`); otherwise a family with no draft
    yet comes before a second member of a drafted one: the ensemble needs members that err
    differently. Once every entry has a draft, a random one is drafted with one parameter moved.
    """
    models = coder.applicable_models(req.profile)
    used = [s.config.get("model") for s in req.siblings if s.operator is Operator.DRAFT]
    unused = [m for m in models if m.id not in used]
    drafted_families = {family(m) for m in models if m.id in used}
    costs = CostModel.for_task(req.profile, req.task.validation)
    unused.sort(key=lambda m: (costs.prior_s(default_config(m.id, req.profile)) > 0.5 * req.per_run_timeout_s, family(m) in drafted_families))
    entry = unused[0] if unused else rng.choice(models)
    config = default_config(entry.id, req.profile)
    if not unused:
        # every family has a draft already: vary it so the new draft is not a copy
        config = mutate_params(config, entry, rng, avoid=())[0]
    on = [f for f, v in config["features"].items() if v]
    advice = [e.title for e, _ in rank_entries(req.profile, req.task.description, top_k=12) if e.level != "model"][:3]
    plan = (
        f"Draft: {entry.title} with default parameters on engineered features "
        f"({', '.join(on) or 'raw columns only'}), trained with the task's folds. {entry.guidance.strip()}"
        + (f" Knowledge that applies to this data: {'; '.join(advice)}." if advice else "")
    )
    return config, plan


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
