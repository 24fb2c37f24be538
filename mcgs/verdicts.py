"""A node's verdict: how its run ended becomes a state, an engine score and a reward, stored.

The candidate never scores itself: a program that exited cleanly is scored by the engine from
its out-of-fold predictions with the task's metric (:func:`mcgs.evaluation.evaluate_workspace`);
anything it printed is kept as a log tail and never read. The reward (DESIGN §4,
:func:`mcgs.policy.compute_reward`) is fixed when the node finishes, one verdict at a time so
each sees every earlier one. After a verdict the engine's process writes ``best/`` when a single
node beats every earlier one, stores its clock and the chosen node, and calls the callbacks.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from mcgs.candidate_files import remove_tree
from mcgs.cost_model import run_cost_model, speed_note
from mcgs.direction import best_of, better
from mcgs.evaluation import OutputError, evaluate_workspace
from mcgs.graph import valid_nodes
from mcgs.node import FrozenNode, NodeState, Operator
from mcgs.policy import compute_reward
from mcgs.sandbox import ExecutionResult, Outcome
from mcgs.storage import ClaimLost

__all__ = ["judge", "record_verdict", "reject", "save_progress", "is_better", "OUTCOME_STATE"]

logger = logging.getLogger(__name__)

#: The node state of each sandbox outcome (before scoring: an OK run may still be invalid).
OUTCOME_STATE = {
    Outcome.OK: NodeState.VALID,
    Outcome.BUGGY: NodeState.BUGGY,
    Outcome.TIMEOUT: NodeState.TIMEOUT,
    Outcome.OOM: NodeState.OOM,
    Outcome.DISK: NodeState.DISK,
    Outcome.PROCESS_LIMIT: NodeState.PROCESS_LIMIT,
    Outcome.CANCELLED: NodeState.INTERRUPTED,
    Outcome.INVALID_OUTPUT: NodeState.INVALID_OUTPUT,
}


def is_better(score: float, others, higher_is_better: bool) -> bool:
    """Whether ``score`` beats every one of ``others`` in the metric's direction (strictly)."""
    return better(score, best_of(others, higher_is_better), higher_is_better)


def judge(search, node: FrozenNode, result: ExecutionResult) -> FrozenNode:
    """Turn a run of ``node``'s program into its verdict, score it and store it.

    Args:
        search: The search.
        node: The node that ran, in its workspace ``search.node_dir(node)``.
        result: The run's record. ``CANCELLED`` (the end of the run's budget came before the
            node's own limit) carries no verdict: the node is stored ``interrupted``, and a
            resume with more budget runs it again.

    Returns:
        The finished node.
    """
    ws = search.node_dir(node)
    state = OUTCOME_STATE[result.outcome]
    error = result.error
    score = None
    if state is NodeState.VALID:
        try:
            score = evaluate_workspace(search.fidelity.labels(node.fidelity), ws, max_bytes=search.max_output_bytes).score
        except OutputError as exc:
            state, error = NodeState.INVALID_OUTPUT, str(exc)
    if state is NodeState.BUGGY and result.traceback_tail:
        error = f"{error}\n{result.traceback_tail}" if error else result.traceback_tail
    if state is not NodeState.VALID and not search.settings.keep_workspaces:
        with contextlib.suppress(OSError):
            remove_tree(ws / "working")
    return record_verdict(search, node, state, score, error, result)


def record_verdict(search, node: FrozenNode, state: NodeState, score: float | None, error: str | None,
                   result: ExecutionResult | None) -> FrozenNode:
    """Store a node's verdict with its reward (``result``: the run's record, None when the
    program never ran) and do what follows a finished node. A node whose claim this process
    lost meanwhile (its lease lapsed and another worker took it) is left as stored."""
    with search.verdict_lock:  # one verdict at a time: rewards see every earlier verdict
        # rewards compare a node with the nodes of its own fidelity only (mcgs.fidelity)
        prior = [n.score for n in valid_nodes(search.graph(), node.fidelity) if n.operator is not Operator.ENSEMBLE]
        reward = None if state is NodeState.INTERRUPTED else compute_reward(state, score, prior, search.task.higher_is_better,
                                                                            search.settings.improvement_threshold)
        try:
            finished = search.storage.finish_node(
                node.id, state=state, score=score, reward=reward, error=error, stdout_tail=result.stdout_tail if result else "",
                stderr_tail=result.stderr_tail if result else "", runtime_s=result.runtime_s if result else 0.0, owner=search.owner,
                resources=(result.peak_rss_mb, result.gpus[0] if result.gpus else None, result.peak_gpu_mb) if result else (None, None, None),
            )
        except ClaimLost as exc:  # our lease lapsed (a stalled engine) and the node was retried
            logger.warning("%s", exc)
            return search.storage.get_node(node.id)
        _after_node(search, finished, prior)
    return finished


def reject(search, node: FrozenNode, review) -> FrozenNode:
    """Finish a node the Code Review rejected (never run), with its reasons."""
    with search.verdict_lock:
        prior = [n.score for n in valid_nodes(search.graph(), node.fidelity) if n.operator is not Operator.ENSEMBLE]
        finished = search.storage.finish_node(
            node.id, state=NodeState.REJECTED, reward=compute_reward(NodeState.REJECTED, None, prior, search.task.higher_is_better),
            error="code review rejected the program: " + "; ".join(review.reasons), runtime_s=0.0,
        )
        _after_node(search, finished, prior)
    return finished


def _after_node(search, node: FrozenNode, prior: list[float]) -> None:
    if not search.is_worker:  # the run's own process keeps best/ and the clock
        if node.is_valid and node.full_fidelity and node.operator is not Operator.ENSEMBLE and (not prior or is_better(node.score, prior, search.task.higher_is_better)):
            search.export_best(node)
        save_progress(search)
        if node.runtime_s and node.config.get("model"):  # a machine that got slower, said once (issue 33 §7)
            note = speed_note(run_cost_model(search))
            if note:
                search.say(f"note: {note}")
    for cb in search.callbacks:
        cb(search, node)


def save_progress(search, status: str | None = None) -> None:
    """Store the run's clock, its chosen node and (given) its status."""
    fields: dict[str, Any] = {"elapsed_s": search.clock.elapsed}
    final = search.final_node
    if final is not None:
        fields["best_node_id"] = final.id
    if status:
        fields["status"] = status
    search.storage.update_run(search.run_id, **fields)
