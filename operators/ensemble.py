"""Ensemble: a node that blends the best valid nodes' out-of-fold predictions (DESIGN §4).

Every valid node has OOF and test predictions on the same folds, so the engine builds ensembles
itself, with no coder: greedy forward selection with replacement over the OOF predictions
(Caruana et al. 2004; or a stacking model, ``ensemble_method``) chooses the members and weights
(:mod:`mcgs.ensemble` holds the algorithms), and the result is stored as a node whose program
reads the members' predictions copied into its own workspace (``members/<node>/``), so it runs
in the sandbox and passes the Code Review like every other program.

When: during the search (a policy with ``ensembles_during_search``, ``mcgs``) every ``ensemble_every`` new valid nodes, unless the
time spent selecting ensembles is past ``ensemble_time_share`` of the elapsed time
(:func:`ensemble_due`); and once at the end of the run, on the budget's reserve (the final
ensemble). Edges: one ``ensembles`` edge from each member, with its weight. The root is its
primary parent. Which node the run hands in, an ensemble or the best single node, is decided by
:mod:`mcgs.final_choice`.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from mcgs.contract import OOF_PATH
from mcgs.direction import best_first
from mcgs.evaluation import OutputError
from mcgs.graph import newest_first, valid_nodes
from mcgs.node import EdgeKind, FrozenNode, NodeRole, NodeState, Operator

__all__ = ["EnsembleState", "ensemble_due", "build_ensemble", "final_ensemble_is_current", "FINAL_REASON"]

logger = logging.getLogger(__name__)

#: The reason of the run's last ensemble (its plan starts with ``[final ensemble]``).
FINAL_REASON = "final ensemble"


@dataclasses.dataclass
class EnsembleState:
    """What the search remembers between ensembles, in one sitting.

    Attributes:
        checked: Valid search nodes when an ensemble selection last ran.
        select_s: Seconds spent selecting ensembles during the search (not the final one).
    """

    checked: int = 0
    select_s: float = 0.0


def ensemble_due(search, g) -> bool:
    """True when the mcgs policy should build an ensemble now: ``ensemble_every`` valid search
    nodes have finished since the last ensemble node (or since the start; ``num_drafts`` for the
    first one when most of the earlier runs on similar data handed in an ensemble:
    :mod:`mcgs.experience`), and the time spent selecting ensembles during the search is within
    ``ensemble_time_share`` of the elapsed wall time."""
    from mcgs.branches import ranked_search_nodes

    settings = search.settings
    every = settings.ensemble_every
    if not search.policy.ensembles_during_search or not settings.ensemble or every <= 0:
        return False
    exp = getattr(search, "experience", None)
    if exp is not None and exp.runs and 2 * exp.ensembles_won >= len(exp.runs) and not any(n.operator is Operator.ENSEMBLE for n in newest_first(g)):
        every = min(every, max(2, settings.num_drafts))  # similar runs ended in ensembles: the first one after the drafts
    valid = len(ranked_search_nodes(g, search.task.higher_is_better))
    if valid < search.ensemble_state.checked + every:
        return False
    fresh = 0  # valid search nodes since the last ensemble node
    for n in newest_first(g):
        if n.operator is Operator.ENSEMBLE:
            break
        fresh += n.is_valid and n.full_fidelity
    if fresh < every:
        return False
    share = settings.ensemble_time_share
    if share > 0 and search.ensemble_state.select_s > share * search.clock.elapsed:
        logger.info("ensemble during the search put off: %.1f s spent selecting ensembles, over %.0f %% of %.0f s",
                    search.ensemble_state.select_s, 100 * share, search.clock.elapsed)
        return False
    return True


def final_ensemble_is_current(nodes) -> bool:
    """Whether the newest of ``nodes`` is a finished final ensemble: a resume that ran no new
    node (its budget already spent) would otherwise add the same ensemble again."""
    newest = max(nodes, key=lambda n: n.seq)
    return (newest.role is NodeRole.FINAL_ENSEMBLE
            and newest.state not in (NodeState.PENDING, NodeState.RUNNING, NodeState.INTERRUPTED))


def build_ensemble(search, reason: str = FINAL_REASON) -> FrozenNode | None:
    """Add an ensemble node over the best valid nodes and run it like any node.

    Args:
        search: The search.
        reason: Shown in the node's plan (:data:`FINAL_REASON` at the end of the run, which may
            take what is left of the budget, at least 60 s).

    Returns:
        The finished ensemble node, or None when fewer than two nodes are worth combining.
    """
    from mcgs.execution import execute

    final = reason == FINAL_REASON
    t0 = time.monotonic()
    node = _add_ensemble_node(search, reason)
    if not final:
        search.ensemble_state.select_s += time.monotonic() - t0
    if node is None:
        return None
    timeout = max(search.clock.remaining, 60.0) if final else search.budget.node_timeout()
    return execute(search, node, timeout, seed=search.settings.seed)


def _candidates(search) -> list[FrozenNode]:
    """The nodes a selection may draw on: the best ``ensemble_max_members`` valid single
    nodes, plus the members of earlier ensembles (a weak node can be a strong member, a
    calibrated or diverse one, and a later selection should find at least what an earlier one
    found)."""
    valid = valid_nodes(search.graph())
    members = [n for n in valid if n.operator is not Operator.ENSEMBLE]
    search.ensemble_state.checked = len(members)
    members.sort(key=lambda n: (best_first(n.score, search.task.higher_is_better), n.seq))
    earlier = {int(i) for e in valid if e.operator is Operator.ENSEMBLE for i in e.config.get("weights", {})}
    limit = search.settings.ensemble_max_members
    return members[:limit] + [n for n in members[limit:] if n.id in earlier]


def _plan(search, reason: str, sel, oofs, by_id) -> str:
    """The ensemble node's plan text."""
    if search.settings.ensemble_method == "stacking":
        return (f"[{reason}] Stacking: a second-level model on the OOF predictions of the {len(sel.weights)} nodes that greedy "
                f"forward selection kept from the best {len(oofs)} valid nodes (node seq) " + ", ".join(str(by_id[i].seq) for i in sel.weights))
    trim = search.settings.ensemble_gross_error_sd
    return (
        f"[{reason}] Greedy forward selection with replacement over the OOF predictions of the best "
        f"{len(oofs)} valid nodes ({sel.criterion} {sel.criterion_value:.6g}); members (node seq: weight) "
        + ", ".join(f"{by_id[i].seq}: {w}" for i, w in sel.weights.items())
        + (f"; {sel.blend} blend" if sel.blend != "mean" else "")
        + (f"; temperature {sel.temperature:g}" if sel.temperature != 1.0 else "")
        + (
            f"; {sel.excluded_rows} OOF rows with gross errors (beyond {trim:g} robust SDs of the members' median) "
            "left out of the selection, not of the score"
            if sel.excluded_rows
            else ""
        )
    )


def _member_predictions(search, members) -> tuple:
    """``(y, folds, oofs)``: the labels and folds of the validated rows and each member's OOF
    predictions (member id -> (rows, columns)); a forecasting task's rows are its validation
    windows, its columns every step of every series. A member whose files are gone or damaged
    is left out."""
    from mcgs.evaluation import evaluate_forecast, read_predictions

    labels = search.labels
    oofs = {}
    for n in members:
        try:
            if search.task.forecast is not None:
                oofs[n.id] = evaluate_forecast(labels, search.node_dir(n), max_bytes=search.max_output_bytes).oof
            else:
                oofs[n.id] = read_predictions(search.task, search.node_dir(n), OOF_PATH, labels.validated_rows, max_bytes=search.max_output_bytes)
        except OutputError:  # workspace removed or damaged: not a candidate
            continue
    rows = labels.validated_rows
    y = labels.y.reshape(len(labels.y), -1) if search.task.forecast is not None else labels.y[rows]
    return y, labels.folds[rows], oofs


def _add_ensemble_node(search, reason: str) -> FrozenNode | None:
    """Select an ensemble and store it as a PENDING node; None when fewer than two nodes are
    worth combining."""
    from mcgs.ensemble import nested_ensemble_score, render_ensemble_program, render_forecast_ensemble_program, render_stacking_program, select_ensemble
    from mcgs.operators.code_review import review_program

    members = _candidates(search)
    if len(members) < 2:
        return None
    forecast = search.task.forecast is not None
    y, folds, oofs = _member_predictions(search, members)
    if len(oofs) < 2:
        return None
    trim = search.settings.ensemble_gross_error_sd
    # a forecast's windows x steps x series are the columns of a multi-target regression
    spec = search.task.model_copy(update={"task_kind": "multi_target_regression"}) if forecast else search.task
    sel = select_ensemble(spec, y, oofs, gross_error_sd=trim)
    if len(sel.weights) < 2 and (sel.temperature == 1.0 or search.settings.ensemble_method == "stacking"):
        logger.info("%s: selection kept a single node; no ensemble node added", reason)
        return None
    try:  # the honest estimate of this ensemble, used for the final choice (mcgs.final_choice)
        nested = nested_ensemble_score(spec, y, oofs, folds, gross_error_sd=trim)
    except ValueError as exc:  # a fold too small for the metric (one class): keep the OOF score
        logger.info("%s: no cross-fitted score (%s)", reason, exc)
        nested = None
    # one member with a fitted temperature is a calibration of that node: still a node of its
    # own, scored on the same OOF rows like any other
    by_id = {n.id: n for n in members}
    weights = {f"members/{search.node_dir(by_id[i]).name}": w for i, w in sel.weights.items()}
    plan = _plan(search, reason, sel, oofs, by_id)
    if forecast:  # a weighted mean of forecasts; its test windows are blended by the engine (mcgs.forecast_mode)
        code = render_forecast_ensemble_program(weights, plan)
    elif search.settings.ensemble_method == "stacking":
        code = render_stacking_program(list(weights), plan)
    else:
        code = render_ensemble_program(weights, plan, sel.blend, sel.temperature)
    review = review_program(code, forecast=forecast)
    root = next(n for n in search.nodes() if n.parent_id is None)
    config = {"weights": {str(i): w for i, w in sel.weights.items()}, "criterion": sel.criterion, "method": search.settings.ensemble_method,
              "blend": sel.blend, "temperature": sel.temperature, "excluded_rows": sel.excluded_rows, "nested_score": nested}
    return search.storage.add_node(
        search.run_id, parent_id=root.id, operator=Operator.ENSEMBLE, plan=plan, code=review.code, config=config,
        extra_edges=[(i, EdgeKind.ENSEMBLES, {"weight": w}) for i, w in sel.weights.items()],
        review=review.as_dict(), owner=search.owner, lease_s=search.settings.lease_s,
        role=NodeRole.FINAL_ENSEMBLE if reason == FINAL_REASON else NodeRole.CANDIDATE,
    )
