"""One expansion of the search graph: select a node and an operator, have the coder write the
program, review it, and store the new node (DESIGN §1, the loop's upper half).

What is selected is the policy's (:func:`mcgs.policy.select_expansion`: UCT over the graph with
virtual loss for nodes in flight); what the request holds and which edges the node gets is the
operator's (:mod:`mcgs.operators`); who writes the program is the coder's (a screened draft plan
first, :class:`mcgs.screening.PlanQueue`). Every program passes the static Code Review
(:mod:`mcgs.operators.code_review`, plus the model's review on the LLM path) before it may run;
a rejected one is finished at once with its reasons. Running the program is the executor's
(:mod:`mcgs.execution`, or the caller's through ``Search.ask``).
"""

from __future__ import annotations

from mcgs.branches import Expansion
from mcgs.coders import CoderAnswer
from mcgs.fidelity import Promotion, child_fidelity, fidelity_label, next_promotion
from mcgs.graph import newest_node, root_of
from mcgs.graph import node as node_of
from mcgs.node import FrozenNode, Operator
from mcgs.operators import OperatorContext, build_request
from mcgs.operators import edges as operator_edges
from mcgs.operators.code_review import review_program
from mcgs.operators.draft import rescue_answer
from mcgs.operators.ensemble import build_ensemble, ensemble_due
from mcgs.policy import select_expansion
from mcgs.verdicts import reject

__all__ = ["launch", "promote"]


def launch(search) -> tuple[FrozenNode, float, int] | None:
    """Claim a queued node, or select, write, review and store the next one.

    Args:
        search: The search.

    Returns:
        ``(node, timeout_s, seed)`` of a PENDING node claimed by this process, or None when the
        step finished without a candidate to run (a program the Code Review rejected, or an
        in-search ensemble, which is built and run here).

    Raises:
        CoderStop: the coder asked the run to stop (its LLM budget).
        TypeError: a user's coder returned something else than a :class:`mcgs.CoderAnswer`.
    """
    queued = search.storage.claim_node(search.run_id, search.owner, search.settings.lease_s)
    if queued is not None:  # a node retried after its worker was lost, or queued by another process
        return queued, search.budget.node_timeout(), search.node_seed(queued)
    g = search.graph()
    if ensemble_due(search, g) and build_ensemble(search, reason="ensemble during the search") is not None:
        return None
    levels = search.fidelity.levels()
    promotion = next_promotion(g, levels, search.settings.halving_eta, search.task.higher_is_better)
    if promotion is not None:
        return promote(search, promotion)
    seq_next = newest_node(g).seq + 1
    seed = search.settings.seed * 100_003 + seq_next
    answer = rescue_answer(search, g, seed)
    if answer is not None:
        exp, request = Expansion(parent_id=root_of(g), operator=Operator.DRAFT, reason="rescue"), None
        search.say(f"node {seq_next}: rescue draft ({answer.config['model']}): no valid node yet after "
                   f"{search.settings.rescue_at:.0%} of the budget")
    else:
        exp = select_expansion(g, search.settings, progress=search.clock.progress, higher_is_better=search.task.higher_is_better,
                               rng=search.rng, policy=search.policy)
        ctx = OperatorContext(graph=g, task=search.task, profile=search.profile, settings=search.settings, seed=seed, seq=seq_next,
                              experience=search.experience)
        request = build_request(ctx, exp)
        answer = search.plans.pop() if exp.operator is Operator.DRAFT and search.plans else search.coder.write(request)
    if not isinstance(answer, CoderAnswer):  # a user's coder object
        raise TypeError(f"{type(search.coder).__name__}.write returned a {type(answer).__name__}; it must return "
                        f"mcgs.CoderAnswer(plan=..., code=..., config={{...}})")
    static = {"train_only_columns": search.profile.get("train_only_columns", ()), "forecast": search.task.forecast is not None}
    review = review_program(answer.code, **static)
    reviewer = getattr(search.coder, "review_program", None)
    if not review.rejected and reviewer is not None and request is not None and answer.config.get("coder") == getattr(search.coder, "name", None):
        verdict = reviewer(review.code, request)  # the Code Review operator's model review of the coder's own program
        if verdict is not None:
            review = review.with_model_review(verdict, **static)
    fidelity = child_fidelity(exp.operator, node_of(g, exp.parent_id), levels if len(levels) > 1 and search.fidelity.halving_pays() else [1.0])
    search.fidelity.input_dir(fidelity)  # its subsample is written before any worker may claim the node
    node = search.storage.add_node(
        search.run_id, parent_id=exp.parent_id, operator=exp.operator, plan=f"[{exp.reason}] {answer.plan}", code=review.code,
        config=answer.config, knowledge_ids=answer.knowledge_ids, extra_edges=operator_edges(exp), review=review.as_dict(),
        owner=search.owner, lease_s=search.settings.lease_s, fidelity=fidelity,
    )
    if answer.ledger_ids:  # calls made before the node had a number (a screened draft plan)
        search.storage.assign_llm_calls(search.run_id, answer.ledger_ids, node.seq)
    if review.rejected:
        reject(search, node, review)
        return None
    return node, search.budget.node_timeout(), seed


def promote(search, promotion: Promotion) -> tuple[FrozenNode, float, int]:
    """Store and claim the node successive halving promotes (:func:`mcgs.fidelity.next_promotion`):
    the low-fidelity node's program, unchanged and already reviewed, one rung up, as its
    Improve child (no coder call)."""
    low = promotion.node
    search.fidelity.input_dir(promotion.fidelity)
    node = search.storage.add_node(
        search.run_id, parent_id=low.id, operator=Operator.IMPROVE, plan=f"[promotion] {promotion.plan}", code=low.code,
        config={**low.config, "promoted_from": low.seq}, knowledge_ids=low.knowledge_ids, review=low.review,
        owner=search.owner, lease_s=search.settings.lease_s, fidelity=promotion.fidelity,
    )
    search.say(f"node {node.seq}: node {low.seq} promoted to fidelity {fidelity_label(promotion.fidelity)} "
               f"(rank {promotion.rank} of {promotion.of} at {fidelity_label(low.fidelity)})")
    return node, search.budget.node_timeout(), search.node_seed(node)
