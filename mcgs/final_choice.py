"""Which node a run hands in: the best single node or an ensemble, among those whose files remain.

:func:`mcgs.ensemble.choose_final` holds the rule (ensembles judged by their cross-fitted score;
the one-standard-error rule for ensembles built after the best node; once the final ensemble
exists it is the only ensemble considered). This module applies it to a run and passes over a
node whose artifacts are lost (its workspace removed or damaged since it was scored), saying so
at most :data:`LOST_SAID_MAX` times.
"""

from __future__ import annotations

from mcgs.candidate_files import candidate_file_exists
from mcgs.contract import OOF_PATH, SUBMISSION_PATH, TEST_PRED_PATH
from mcgs.forecast import VAL_FORECAST_PATH
from mcgs.direction import best_first
from mcgs.evaluation import OutputError
from mcgs.graph import valid_nodes
from mcgs.node import FrozenNode, Operator

__all__ = ["final_node", "lost_artifacts", "choice_notes", "LOST_SAID_MAX"]

LOST_SAID_MAX = 5  # nodes with lost artifacts named one by one


def lost_artifacts(search, node: FrozenNode) -> str | None:
    """Why ``node`` cannot be handed in any more, or None: its workspace (or, for an ensemble,
    a member's) no longer holds its submission and predictions as regular files (a forecasting
    node: its validation forecasts; its model is checked when forecast mode runs it)."""
    needed = [(node, (VAL_FORECAST_PATH,) if search.task.forecast is not None else (SUBMISSION_PATH,))]
    if node.operator is Operator.ENSEMBLE:
        by_id = {n.id: n for n in search.nodes()}
        files = (VAL_FORECAST_PATH,) if search.task.forecast is not None else (OOF_PATH, TEST_PRED_PATH)
        needed += [(by_id[int(i)], files) for i in node.config.get("weights", {}) if int(i) in by_id]
    for n, files in needed:
        ws = search.node_dir(n)
        if not ws.is_dir():
            return f"the workspace {ws} of node {n.seq} is gone"
        for rel in files:
            if not candidate_file_exists(ws, rel):
                return f"{rel} of node {n.seq} is missing or not a regular file"
    return None


def _say_lost(search, node: FrozenNode, problem: str, said: set[int]) -> None:
    if node.id in said:
        return
    said.add(node.id)
    warn = search.warn
    if len(said) <= LOST_SAID_MAX:
        warn(f"warning: node {node.seq}'s artifacts are lost ({problem}); it cannot be handed in, so the run chooses among the other nodes")
    elif len(said) == LOST_SAID_MAX + 1:
        warn("warning: the artifacts of more nodes are lost too; they are passed over without a word each")


def final_node(search, said: set[int]) -> FrozenNode | None:
    """The node ``search`` hands in now, or None when no valid node exists.

    Args:
        search: The search.
        said: Ids of nodes whose lost artifacts were already reported (updated).
    """
    from mcgs.ensemble import choose_final, fold_standard_error
    from mcgs.evaluation import read_predictions

    valid = valid_nodes(search.graph())
    hib = search.task.higher_is_better
    singles = sorted((n for n in valid if n.operator is not Operator.ENSEMBLE), key=lambda n: (best_first(n.score, hib), n.seq))
    ensembles = [n for n in valid if n.operator is Operator.ENSEMBLE]
    lost: set[int] = set()
    i = 0
    while i < len(singles):
        best = singles[i]

        def standard_error(best=best) -> float:
            labels = search.labels
            rows = labels.validated_rows
            try:
                oof = read_predictions(search.task, search.node_dir(best), OOF_PATH, rows, max_bytes=search.max_output_bytes)
            except OutputError:  # the workspace is gone: no slack
                return 0.0
            return fold_standard_error(search.task, labels.y[rows], oof, labels.folds[rows])

        final = choose_final(best, [e for e in ensembles if e.id not in lost], search.task.higher_is_better, standard_error)
        problem = lost_artifacts(search, final)
        if problem is None:
            return final
        lost.add(final.id)
        if final.id == best.id:
            i += 1
        _say_lost(search, final, problem, said)
    return None


def choice_notes(nodes, chosen, higher_is_better: bool) -> list[tuple[str, str]]:
    """Rows of the run summary that say why the chosen node is not simply the top score.

    The progress line shows the best out-of-fold score of any node, ensembles included; the
    final choice (:func:`mcgs.ensemble.choose_final`) judges ensembles by their cross-fitted
    score and, once the final ensemble exists, considers no other ensemble. Without these rows
    a user sees the progress line end on a score the chosen node does not have.

    Args:
        nodes: The run's finished nodes.
        chosen: The node handed in (``search.final_node``), or None.
        higher_is_better: The metric's direction.

    Returns:
        ``(label, text)`` pairs, possibly empty.
    """
    from mcgs.ensemble import honest_score

    if chosen is None:
        return []

    def rank(n) -> float:  # larger is better
        return -best_first(n.score, higher_is_better)

    notes = []
    valid = [n for n in nodes if n.is_valid and n.full_fidelity]
    ens = [n for n in valid if n.operator.value == "ensemble"]
    singles = [n for n in valid if n.operator.value != "ensemble"]
    if chosen.operator.value != "ensemble":
        if ens:
            last = ens[-1]
            when = "built after" if last.seq > chosen.seq else "built before"
            notes.append(("ensemble", f"node {last.seq} ({when} node {chosen.seq}) scored {honest_score(last):.6f} cross-fitted: not chosen "
                                      f"(docs/search.md, Ensembles: one built before the best node must beat it; one built after must be within one standard error)"))
        return notes
    honest = honest_score(chosen)  # what the choice compared with the single nodes' scores
    if singles and rank(top := max(singles, key=rank)) > -best_first(honest, higher_is_better):
        notes.append(("ensemble chosen", f"best single node {top.seq} scored {top.score:.6f}; the ensemble's {honest:.6f} cross-fitted is within "
                                         "one standard error of it and averages more models (docs/search.md, Ensembles)"))
    others = [n for n in ens if n.id != chosen.id and rank(n) > rank(chosen)]
    if others:
        top = max(others, key=rank)
        notes.append(("top out-of-fold", f"node {top.seq} (an ensemble during the search) scored {top.score:.6f} out-of-fold, the progress line's "
                                         f"best; not chosen: an ensemble's own out-of-fold score is optimistic, so the choice uses cross-fitted "
                                         f"scores ({honest_score(top):.6f} for node {top.seq}) and, once the final ensemble exists, no other "
                                         "ensemble (docs/search.md, Ensembles)"))
    return notes
