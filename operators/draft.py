"""Draft: a new branch from the root, from a knowledge entry that no other draft used; or, once,
the starter program a user gave (``--baseline``, MLAgentBench mode: :func:`run_baseline`)."""

from __future__ import annotations

from mcgs.coders import CoderRequest
from mcgs.node import Operator
from mcgs.operators.context import OperatorContext
from mcgs.policy import Expansion


def build_request(ctx: OperatorContext, exp: Expansion) -> CoderRequest:
    """Request a draft; the existing drafts are passed as siblings so the coder diversifies."""
    return ctx.request(exp, Operator.DRAFT, with_parent=False)


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
