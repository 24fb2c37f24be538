"""Fidelity: candidates run on a share of the training rows, and successive halving promotes the
configs that are competitive there (issue 33 §2).

A node's *fidelity* is the share of the task's training rows its program sees (1 = full
fidelity: the data and fold scheme the final choice uses). A lower fidelity is a fixed,
stratified row subsample of the task (:func:`build_fidelity_task`, seeded by the run's seed),
validated as the task is (its k folds or its holdout, so a rung costs about its share of the
rows), prepared once per run under ``RUN_DIR/fidelity/<share>/`` and scored by the engine on
that subsample's own folds. Scores are compared only between nodes of one fidelity: rewards
are normalised among them, and the best node, the branch bests, the global top-K, the final
choice and every ensemble use full-fidelity nodes only.

**Rungs.** On a task of ``n`` training rows the fidelities are ``1, 1/eta, 1/eta^2, ...``, as
many low rungs as ``halving_rungs`` allows with at least ``halving_min_rows`` rows in the lowest
(:func:`rungs`); a task with fewer than ``eta * halving_min_rows`` rows runs at full fidelity
only.

**Which node runs where** (:func:`child_fidelity`). Improve of a full-fidelity node, the search's
many parameter and feature moves, runs on the lowest rung while full fidelity is dear
(:meth:`FidelityData.halving_pays`: the median full-fidelity node takes more than
``halving_cost_share`` of the budget), else on all rows; Improve and Debug of a low-fidelity
node stay on its rung; Draft, Evolve, Fusion, Aggregate and Ensemble run at full fidelity (they
found or merge branches, whose bests the search compares).

**Promotion** (:func:`next_promotion`): asynchronous successive halving (ASHA: Li, Jamieson,
Rostamizadeh, Gonina, Ben-Tzur, Hardt, Recht, Talwalkar, *A System for Massively Parallel
Hyperparameter Tuning*, MLSys 2020; successive halving: Jamieson & Talwalkar, AISTATS 2016). A
node of rung ``r`` is promoted (the same program, no coder call, run again one rung up) once it
is among the top ``1/eta`` of the finished nodes of rung ``r`` (failures ranked last) and was
not promoted before; the highest rung is served first. Promotion comes before any other
expansion, so a competitive config reaches full fidelity without waiting for the policy.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx

from mcgs.direction import best_first
from mcgs.graph import nodes_by_seq
from mcgs.node import FrozenNode, NodeRole, NodeState, Operator

if TYPE_CHECKING:
    from mcgs.evaluation import TaskLabels
    from mcgs.settings import SearchSettings
    from mcgs.task import TaskSpec

__all__ = ["rungs", "child_fidelity", "next_promotion", "Promotion", "FidelityData", "fidelity_label", "build_fidelity_task"]

#: Operators whose nodes always run at full fidelity.
FULL_FIDELITY_OPERATORS = frozenset({Operator.DRAFT, Operator.EVOLVE, Operator.FUSION, Operator.AGGREGATE, Operator.ENSEMBLE})


def rungs(n_train: int, settings: "SearchSettings") -> list[float]:
    """The fidelities a task's nodes may run at, highest first: ``[1.0]``, then
    ``1/eta, 1/eta^2, ...`` while the rung keeps ``halving_min_rows`` rows, at most
    ``halving_rungs`` of them."""
    out = [1.0]
    for k in range(1, settings.halving_rungs + 1):
        share = settings.halving_eta ** -k
        if n_train * share < settings.halving_min_rows:
            break
        out.append(share)
    return out


def fidelity_label(fidelity: float) -> str:
    """A fidelity as the run folder and messages name it: ``"1"``, ``"0.333"``, ``"0.111"``."""
    return "1" if fidelity >= 1 else f"{fidelity:.3g}"


def child_fidelity(operator: Operator, parent: FrozenNode | None, levels: list[float]) -> float:
    """The fidelity of a new node of ``operator`` built on ``parent`` (see the module's rule)."""
    if len(levels) < 2 or operator in FULL_FIDELITY_OPERATORS or parent is None or parent.operator is Operator.ROOT:
        return 1.0
    if parent.fidelity < 1.0:
        return parent.fidelity
    return levels[-1] if operator is Operator.IMPROVE else 1.0


def build_fidelity_task(task: "TaskSpec", dest: Path, fidelity: float, seed: int) -> "TaskSpec":
    """Write the subsample of ``fidelity`` of a task's training rows under ``dest`` and return its
    spec: stratified on the label for classification, rows in their order, validated as the task
    is (its k folds, or its holdout: the lowest rung keeps ``halving_min_rows`` rows, so a
    holdout of a fifth still scores on thousands), and a few hundred test rows (a low-fidelity
    node's test predictions are never handed in)."""
    from mcgs.screening import build_screen_task

    return build_screen_task(task, dest, max(1, int(round(task.n_train * fidelity))), seed, keep_holdout=True)


class Promotion:
    """A node to run again one rung up.

    Attributes:
        node: The low-fidelity node whose program is promoted.
        fidelity: The rung it is promoted to.
        rank: Its place among the finished nodes of its rung (1 = best).
        of: How many nodes of its rung had finished.
    """

    def __init__(self, node: FrozenNode, fidelity: float, rank: int, of: int):
        self.node, self.fidelity, self.rank, self.of = node, fidelity, rank, of

    @property
    def plan(self) -> str:
        return (f"Promote node {self.node.seq} from fidelity {fidelity_label(self.node.fidelity)} to {fidelity_label(self.fidelity)}: "
                f"it ranks {self.rank} of the {self.of} finished nodes of its rung (successive halving keeps the top 1/eta). "
                f"Same program. {self.node.plan}")


def next_promotion(g: nx.DiGraph, levels: list[float], eta: int, higher_is_better: bool) -> Promotion | None:
    """The next node successive halving promotes, or None (see the module's rule).

    Args:
        g: The run graph.
        levels: :func:`rungs` of the task (highest first).
        eta: The halving factor.
        higher_is_better: The metric's direction.
    """
    if len(levels) < 2:
        return None
    nodes = [n for n in nodes_by_seq(g) if n.operator is not Operator.ROOT and n.role is NodeRole.CANDIDATE]
    promoted = {n.config.get("promoted_from") for n in nodes if n.config.get("promoted_from") is not None}
    for up, rung in zip(levels[:-1], levels[1:]):  # the highest low rung first
        finished = [n for n in nodes if math.isclose(n.fidelity, rung) and n.state.is_finished() and n.state is not NodeState.INTERRUPTED]
        valid = sorted((n for n in finished if n.is_valid), key=lambda n: (best_first(n.score, higher_is_better), n.seq))
        top = valid[: len(finished) // eta]
        for rank, n in enumerate(top, start=1):
            if n.seq not in promoted:
                return Promotion(n, up, rank, len(finished))
    return None


class FidelityData:
    """The prepared input and the labels of each fidelity of a run.

    A low fidelity's subsample is written once under ``RUN_DIR/fidelity/<share>/`` (a
    ``ready.json`` marks it complete, so a resumed run or a joining worker reuses it); full
    fidelity is the run's own ``input/``.

    Args:
        search: The search whose run it serves (its task, run folder, seed and labels).
    """

    def __init__(self, search):
        self.search = search
        self._lock = threading.Lock()
        self._specs: dict[float, "TaskSpec"] = {}
        self._labels: dict[float, "TaskLabels"] = {}

    def levels(self) -> list[float]:
        """:func:`rungs` of the run's task under its settings; a forecasting task has the one
        (its windows are not rows to subsample)."""
        if self.search.task.forecast is not None:
            return [1.0]
        return rungs(self.search.task.n_train, self.search.settings)

    def halving_pays(self) -> bool:
        """Whether a new node should start on a low rung now: full-fidelity nodes are dear, the
        median run time of the valid ones exceeding ``halving_cost_share`` of the time budget
        (with none yet, they are taken to be). Where the budget affords many full-fidelity
        nodes, every Improve runs on all rows (a rung's nodes are not free: each costs a
        program's start-up, and a promotion runs the config again)."""
        import statistics

        s = self.search.settings
        done = [n.runtime_s for n in self.search.nodes() if n.is_valid and n.full_fidelity and n.runtime_s and n.operator is not Operator.ENSEMBLE]
        return not done or statistics.median(done) > s.halving_cost_share * s.time_budget_s

    def _folder(self, fidelity: float) -> Path:
        return self.search.run_dir / "fidelity" / fidelity_label(fidelity)

    def _spec(self, fidelity: float) -> "TaskSpec":
        from mcgs.contract import prepare_run_input
        from mcgs.task import TaskSpec

        if fidelity in self._specs:
            return self._specs[fidelity]
        folder = self._folder(fidelity)
        ready = folder / "ready.json"
        if ready.is_file():
            spec = TaskSpec.model_validate_json(ready.read_text())
        else:
            task = self.search.task
            spec = build_fidelity_task(task, folder / "task", fidelity, self.search.settings.seed)
            prepare_run_input(spec, folder, self.search.settings.weights_dir)
            tmp = folder / "ready.tmp"
            tmp.write_text(spec.model_dump_json())
            os.replace(tmp, ready)
            self.search.say(f"fidelity {fidelity_label(fidelity)}: a subsample of {spec.n_train} of {task.n_train} training rows "
                            f"for successive halving ({spec.validation.kind} validation)")
        self._specs[fidelity] = spec
        return spec

    def input_dir(self, fidelity: float) -> Path:
        """The ``input/`` folder a node of ``fidelity`` reads (written on first use)."""
        if fidelity >= 1.0:
            return self.search.input_dir
        with self._lock:
            self._spec(fidelity)
            return self._folder(fidelity) / "input"

    def labels(self, fidelity: float) -> "TaskLabels":
        """The labels and folds a node of ``fidelity`` is scored with."""
        if fidelity >= 1.0:
            return self.search.labels
        from mcgs.evaluation import TaskLabels

        with self._lock:
            if fidelity not in self._labels:
                spec = self._spec(fidelity)
                inp = self._folder(fidelity) / "input"
                self._labels[fidelity] = TaskLabels.load(spec.model_copy(update={"data_dir": inp}), inp / "folds.csv")
            return self._labels[fidelity]
