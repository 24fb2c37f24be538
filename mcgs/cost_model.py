"""Predict a candidate's run time from the data, its model and its parameters, calibrated on the
run's own finished nodes (issue 33 §1).

The prior follows the work a recipe program does: fits of the model on the training folds,
each costing the model's ``relative_cost`` (its knowledge entry) times the data it sees:

``seconds = OVERHEAD_S + UNIT_S * relative_cost * rows * features * rounds * refit * classes * seeds * folds``

* ``rows``: training rows / 5 000, raised to the family's exponent (1 for trees and linear
  models; 1.5 for k-NN, whose brute-force search costs rows x test rows; 2 for kernel SVMs,
  O(n^2) to O(n^3) in the rows: Bottou & Lin, *Support Vector Machine Solvers*, 2007);
* ``features``: sqrt(features / 20), at least 0.5 (histogram trees scan each feature; columns
  beyond a few dozen add less than linearly once they are sparse or constant);
* ``rounds``: the config's boosting rounds or iterations over the entry's default (a cap under
  early stopping, so the calibration absorbs how early it stops);
* ``refit``: the entry's :data:`REFIT_WORK` for the boosted models that are boosted again on the
  whole training fold after stopping early (``REFIT_AFTER_STOPPING``), else 1;
* ``classes``: the number of classes for boosted trees on a multi-class task (one tree per class
  per round), else 1; ``seeds``: ``n_seeds``; ``folds``: fits on all rows the fold scheme is
  worth (k folds: k - 1; a holdout of 1/k: (k - 1) / k).

``UNIT_S`` = 0.25 s and ``OVERHEAD_S`` = 2 s (Python, reading the data, writing the outputs)
come from the default LightGBM program on the public suite with 2 threads
(docs/results/early_stopping.md: 0.12-0.3 s per unit over 17 tasks). The scale is machine- and
load-dependent, so each prediction is multiplied by a calibration learned from the run's own
finished nodes: each model family's offset from the run's mean log ratio actual / prior (the
family's own scale, over all its nodes) and the machine's current speed (the mean of the newest
nodes' log ratios, less their families' offsets), each shrunk towards no correction by one
pseudo-observation.
FLAML's cost-frugal search (Wu, Wang, Li, Liu: *Frugal Optimization for Cost-related
Hyperparameters*, AAAI 2021) is the reference for using such costs in choosing what to try.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Iterable

__all__ = ["CostModel", "fold_work", "prediction_error", "replay_run", "run_cost_model", "cost_model_from_nodes", "candidate_limit", "speed_note", "OVERHEAD_S", "UNIT_S", "MIN_PREDICTED_LIMIT_S", "UNSEEN_FAMILY_MARGIN", "REFIT_WORK"]

OVERHEAD_S = 2.0
UNIT_S = 0.25
#: A limit set from a prediction is never below this many seconds: a prediction is a few
#: seconds for small data, where start-up noise (imports, a busy disk) is most of the run.
MIN_PREDICTED_LIMIT_S = 30.0
#: States whose run time is a full run of the program (a timeout's is only a lower bound).
_OBSERVED_STATES = ("valid", "buggy", "invalid_output")
#: How many of the newest nodes say how fast the machine is now (:meth:`CostModel.calibration`).
RECENT_NODES = 8
#: How many of the newest nodes :meth:`CostModel.slowdown` compares with the nodes before them.
SLOWDOWN_NODES = 4
#: A slowdown at or above this factor is reported to the user; below :data:`RECOVERED_BELOW`
#: again, the recovery is (:func:`speed_note`).
SLOWDOWN_REPORTED = 1.5
RECOVERED_BELOW = 1.25
#: A recipe family's limit, until one of its nodes has finished, is this many times wider, over
#: the larger of its prior and its calibrated prediction: the prior alone is off by a median
#: factor of 1.8 and up to 4 for a family, against 1.3 once the run has seen the family finish
#: (docs/results/cost_model.md), and the calibration learnt from other families can lower a new
#: family's prediction by their errors (on bird_strike_phase LightGBM's prior was 7x its run
#: time, and three of the next four drafts were cut at 4x predictions of 5-27 s).
UNSEEN_FAMILY_MARGIN = 2.0
#: Columns the ``text_content`` feature block adds per text column (at most 200 word indicators
#: and 32 SVD components: ``knowledge_base/recipes/fe_text_content.py.j2``).
TEXT_CONTENT_COLUMNS = 232
#: Work of a boosted model stopped early and then boosted again on its whole training fold,
#: over the stopped model alone, by entry (those of ``REFIT_AFTER_STOPPING`` in
#: :mod:`mcgs.coders.recipe_config`): the median ratio of run times less the overhead on the
#: suite's tasks (docs/results/fold_refit.md: LightGBM 17 tasks, CatBoost 12).
REFIT_WORK = {"model.lightgbm": 1.7, "model.catboost": 2.0}
#: Columns of the ``image_features`` block (``knowledge_base/recipes/fe_image_features.py.j2``).
IMAGE_FEATURE_COLUMNS = 223
#: Seconds to read one image, and per megapixel of it (decoding, converting, resizing).
IMAGE_READ_S = 0.0005
IMAGE_READ_S_PER_MPX = 0.05
#: An image network's seconds per thousand training images of 32 x 32 pixels at its entry's
#: default width and epochs, per unit of the entry's ``relative_cost``: model.image_cnn's default
#: program took 8.5 s per epoch of 11 340 such images on this project's 2-core machine
#: (aerial-cactus-identification), 15 s per thousand images over its 20 epochs, over its 40.
NETWORK_UNIT_S = 0.375
#: Seconds of a graph network's program per million node-feature cells (nodes x features) per
#: unit of the entry's ``relative_cost``, at its default epochs: model.appnp's default program
#: (relative cost 6, 300 epochs) took about 24 s on Planetoid's Cora (2 708 nodes x 1 433
#: features) on one of this project's cores, beside other work.
GRAPH_UNIT_S = 1.0
#: A sparse-input graph network's (recipe ``sparse_features``) work per node beyond its non-zero
#: feature cells, in feature cells: its propagation and dense layers. Fitted with model.grand's
#: relative cost to its default program's times on Planetoid's Cora (2 708 nodes, 1.3 % of
#: 1 433 features non-zero: 41-43 s) and CiteSeer (3 327 nodes, 0.9 % of 3 703: 52-60 s).
SPARSE_NODE_WIDTH = 50.0
#: How a model's work grows with the training rows, by entry (1 when not listed).
ROW_EXPONENT = {"model.knn": 1.5, "model.svm": 2.0}


def fold_work(kind: str, n_splits: int) -> float:
    """Fits on all training rows that a fold scheme is worth: ``k - 1`` for k folds (k fits on
    (k-1)/k of the rows), ``(k-1)/k`` for a holdout of 1/k, ``k / 2`` for a time split (fold j
    trains on the j chunks before it)."""
    if kind == "holdout":
        return (n_splits - 1) / n_splits
    if kind == "time_split":
        return n_splits / 2
    return float(n_splits - 1)


class CostModel:
    """Run-time predictions for one task, calibrated as nodes finish.

    Args:
        profile: The task's data profile (:func:`mcgs.profile.profile_task`): ``n_train``,
            ``n_features``, ``n_classes``, ``n_text``, ``task_kind``.
        folds: :func:`fold_work` of the task's fold scheme (its lower fidelities use the same,
            :func:`mcgs.fidelity.build_fidelity_task`).
        offsets: Model family -> its log cost relative to the other families as earlier runs on
            similar data measured it (:attr:`mcgs.experience.Experience.cost_offsets`): where a
            family's offset starts before this run has seen it run.
    """

    def __init__(self, profile: dict[str, Any], folds: float = 4.0, offsets: dict[str, float] | None = None):
        self.profile, self.folds, self.offsets = profile, folds, dict(offsets or {})
        self._observed: list[tuple[str, float]] = []  # (model, log(actual / prior)) in the order seen

    @classmethod
    def for_task(cls, profile: dict[str, Any], validation, offsets: dict[str, float] | None = None) -> "CostModel":
        """The cost model of a task: its profile and its fold scheme (a
        :class:`mcgs.task.ValidationSpec`; folds left out count as the row count's default),
        with families' ``offsets`` from earlier runs."""
        from mcgs.task import default_n_splits

        kind = validation.kind or "kfold"
        return cls(profile, fold_work(kind, validation.n_splits or default_n_splits(int(profile.get("n_train") or 1))), offsets)

    def prior_s(self, config: dict[str, Any], fidelity: float = 1.0) -> float:
        """The uncalibrated prediction for a recipe config run on ``fidelity`` of the training
        rows (:mod:`mcgs.fidelity`), seconds.

        Raises:
            KeyError: the config's model is not a knowledge entry.
        """
        from mcgs.coders.recipe_config import BOOSTED_TREES, COST_PARAMS, TABLE_BASE
        from mcgs.knowledge_base import get_entry

        entry = get_entry(config["model"])
        p = self.profile
        if entry.recipe is not None and entry.recipe.base != TABLE_BASE:
            if p.get("graph"):
                return self._graph_prior_s(entry, config)
            return self._network_prior_s(entry, config, fidelity)
        n = max(1.0, (p.get("n_train") or 1) * fidelity)
        rows = (n / 5000.0) ** ROW_EXPONENT.get(entry.id, 1.0)
        n_features = max(1, p.get("n_features") or 1)
        if config.get("features", {}).get("text_content"):  # the text's words and components as columns
            n_features += TEXT_CONTENT_COLUMNS * (p.get("n_text") or 0)
        features = max(0.5, math.sqrt(n_features / 20.0)) * (1 + (p.get("n_text") or 0))
        defaults = entry.recipe.params if entry.recipe else {}
        rounds = 1.0
        for name in COST_PARAMS:  # rounds or iterations: the work grows linearly with them
            if name in config.get("params", {}) and defaults.get(name):
                rounds = float(config["params"][name]) / float(defaults[name])
        classes = float(p.get("n_classes") or 1) if entry.id in BOOSTED_TREES and p.get("task_kind") == "multiclass" else 1.0
        seeds = float(config.get("n_seeds", 1))
        relative = entry.recipe.relative_cost if entry.recipe else 1.0
        refit = REFIT_WORK.get(entry.id, 1.0)
        if config.get("features", {}).get("image_features") and p.get("media"):
            n_features = IMAGE_FEATURE_COLUMNS
            features = max(0.5, math.sqrt(n_features / 20.0))
        return (OVERHEAD_S + self._image_read_s(fidelity) + UNIT_S * relative * rows * features * rounds * refit * classes * seeds
                * self.folds)

    def _image_read_s(self, fidelity: float) -> float:
        """Seconds an image task's program spends reading (decoding, resizing) its images: per
        image :data:`IMAGE_READ_S` plus :data:`IMAGE_READ_S_PER_MPX` per megapixel. 0 for a table."""
        media = self.profile.get("media")
        if not media:
            return 0.0
        from mcgs.media import commonest_size

        n = (self.profile.get("n_train") or 0) * fidelity + (self.profile.get("n_test") or 0)
        w, h = commonest_size(media)
        return n * (IMAGE_READ_S + IMAGE_READ_S_PER_MPX * w * h / 1e6)

    def _network_prior_s(self, entry, config: dict[str, Any], fidelity: float) -> float:
        """The prior of an image network's program: reading the images, then
        ``NETWORK_UNIT_S * relative_cost`` per thousand training images of 32 x 32 pixels at the
        entry's default width and epochs, growing with the pixels (at most the program's resize
        size), the width squared (a convolution's work), the epochs, the seeds and the folds."""
        from mcgs.coders.recipe_config import MAX_IMAGE_SIZE
        from mcgs.media import commonest_size

        p = self.profile
        side = min(max(commonest_size(p.get("media"))), MAX_IMAGE_SIZE)
        params, defaults = config.get("params", {}), entry.recipe.params
        width = float(params.get("width", defaults.get("width", 16))) / float(defaults.get("width", 16) or 16)
        epochs = float(params.get("epochs", defaults.get("epochs", 1))) / float(defaults.get("epochs", 1) or 1)
        n = max(1.0, (p.get("n_train") or 1) * fidelity) / 1000.0
        work = NETWORK_UNIT_S * entry.recipe.relative_cost * n * (side * side / 1024.0) * width**2 * epochs
        return OVERHEAD_S + self._image_read_s(fidelity) + work * float(config.get("n_seeds", 1)) * self.folds

    def _graph_prior_s(self, entry, config: dict[str, Any]) -> float:
        """The prior of a graph network's program (:data:`GRAPH_UNIT_S`): full-graph epochs, so
        the work grows with the nodes times the features and the epochs, whatever the training
        rows (every fold trains on the whole graph). A network with a sparse first layer
        (recipe ``sparse_features``) counts the non-zero feature cells and
        :data:`SPARSE_NODE_WIDTH` per node instead of every cell."""
        p = self.profile
        params, defaults = config.get("params", {}), entry.recipe.params
        epochs = float(params.get("epochs", defaults.get("epochs", 1))) / float(defaults.get("epochs", 1) or 1)
        width = max(1, p.get("n_features") or 1)
        density = p["graph"].get("feature_density")
        if entry.recipe.sparse_features and density is not None:
            width = width * density + SPARSE_NODE_WIDTH
        cells = p["graph"]["nodes"] * width / 1e6
        work = GRAPH_UNIT_S * entry.recipe.relative_cost * cells * epochs
        return OVERHEAD_S + work * float(config.get("n_seeds", 1)) * self.folds

    def observe(self, config: dict[str, Any], actual_s: float, fidelity: float = 1.0) -> None:
        """Learn from a finished node: its config, its fidelity and its run time, seconds (> 0)."""
        if actual_s > 0 and config.get("model"):
            self._observed.append((config["model"], math.log(actual_s / self.prior_s(config, fidelity))))

    def calibration(self, model: str) -> float:
        """The factor the prior of ``model`` is multiplied by: ``exp(machine + family)``.

        ``family`` is how the model's log ratios (actual / prior) sit above the run's mean, over
        all its nodes; ``machine`` is the mean log ratio of the last :data:`RECENT_NODES` nodes,
        each less its own family's offset, so a machine that got slower (another job started)
        shows within a few nodes as a slower machine, not as slow models. Each mean is shrunk
        towards its prior by one pseudo-observation: 0, or a family's offset from earlier runs
        (``offsets``), which is also the offset of a family this run has not seen yet."""
        if not self._observed:
            return math.exp(self.offsets.get(model, 0.0))
        overall = sum(r for _, r in self._observed) / (len(self._observed) + 1)
        offsets: dict[str, float] = dict(self.offsets)
        for m in {m for m, _ in self._observed}:
            own = [r for mm, r in self._observed if mm == m]
            offsets[m] = (sum(r - overall for r in own) + self.offsets.get(m, 0.0)) / (len(own) + 1)
        recent = self._observed[-RECENT_NODES:]
        machine = sum(r - offsets[m] for m, r in recent) / (len(recent) + 1)
        return math.exp(machine + offsets.get(model, 0.0))

    def slowdown(self, upto: int | None = None) -> float:
        """How many times slower the machine ran the newest :data:`SLOWDOWN_NODES` nodes than
        the nodes before them: ``exp`` of the difference of their mean log ratios (actual /
        prior), each less its family's offset (:meth:`calibration`), so a run that moved to a
        dearer model family is not read as a slower machine. 1.0 until there are
        :data:`SLOWDOWN_NODES` nodes before the newest ones.

        Args:
            upto: Consider only the first ``upto`` observed nodes (the state before the newest).
        """
        seen = self._observed[:upto] if upto is not None else self._observed
        if len(seen) < 2 * SLOWDOWN_NODES:
            return 1.0
        overall = sum(r for _, r in seen) / len(seen)
        offsets: dict[str, float] = {}
        for m in {m for m, _ in seen}:
            own = [r for mm, r in seen if mm == m]
            offsets[m] = sum(r - overall for r in own) / len(own)
        recent, earlier = seen[-SLOWDOWN_NODES:], seen[:-SLOWDOWN_NODES]
        level = lambda obs: sum(r - offsets[m] for m, r in obs) / len(obs)  # noqa: E731
        return math.exp(level(recent) - level(earlier))

    @property
    def observed(self) -> int:
        """How many finished nodes the model has learned from."""
        return len(self._observed)

    def has_observed(self, model: str) -> bool:
        """Whether a node of ``model`` (a knowledge entry id) has run to its end in this run."""
        return any(m == model for m, _ in self._observed)

    def predict_s(self, config: dict[str, Any], fidelity: float = 1.0) -> float:
        """The calibrated prediction for a recipe config, seconds."""
        return self.prior_s(config, fidelity) * self.calibration(config["model"])


def run_cost_model(search) -> CostModel:
    """A run's cost model, calibrated on every node of the run that ran to its end with a
    recipe config (:func:`cost_model_from_nodes`). Rebuilt from storage, so a resumed run
    predicts as the run that stopped did."""
    exp = getattr(search, "experience", None)
    return cost_model_from_nodes(search.profile, search.task.validation, search.nodes(), exp.cost_offsets if exp else None)


def cost_model_from_nodes(profile: dict[str, Any], validation, nodes: Iterable, offsets: dict[str, float] | None = None) -> CostModel:
    """The cost model of a task (:meth:`CostModel.for_task`) calibrated on ``nodes``: those that
    ran to their end (valid, buggy or with invalid output; a timeout's run time is only a lower
    bound) with a recipe config of a known model entry, in the order they finished (so the
    newest say how fast the machine is now, even with parallel workers)."""
    model = CostModel.for_task(profile, validation, offsets)
    usable = _observable(nodes)
    usable.sort(key=lambda n: n.finished_at.timestamp() if n.finished_at else 0.0)  # stable: creation order among equals
    for n in usable:
        model.observe(n.config, n.runtime_s, n.fidelity)
    return model


def _observable(nodes: Iterable) -> list:
    """The nodes the cost model learns from, in the order given: those that ran to their end
    (valid, buggy or with invalid output; a timeout's run time is only a lower bound) with a
    recipe config of a known model entry."""
    from mcgs.knowledge_base import get_entry

    usable = []
    for n in nodes:
        if n.config.get("model") and n.runtime_s and n.state.value in _OBSERVED_STATES:
            try:
                get_entry(n.config["model"])
            except KeyError:
                continue
            usable.append(n)
    return usable


def speed_note(model: CostModel) -> str | None:
    """What to tell the user when the newest node changed how fast the machine runs candidates:
    a slowdown (:meth:`CostModel.slowdown`) that has just reached :data:`SLOWDOWN_REPORTED`, or
    one that has just fallen back below :data:`RECOVERED_BELOW`; None otherwise, so each change
    is said once."""
    now, before = model.slowdown(), model.slowdown(model.observed - 1)
    if now >= SLOWDOWN_REPORTED > before:
        return (f"candidates are running {now:.1f}x slower than earlier in this run (each measured against the cost model's "
                "prediction for its own program): another process is probably using the cores. The search goes on; each "
                "candidate's time limit follows the slower machine")
    if now < RECOVERED_BELOW <= before and _slowdown_told(model, model.observed - 1):
        return "candidates run about as fast as earlier in this run again"
    return None


def _slowdown_told(model: CostModel, upto: int) -> bool:
    """Whether a slowdown was told and not yet its recovery, as of the first ``upto`` observed
    nodes: the slowdowns back from there stayed at or above :data:`RECOVERED_BELOW` since one
    reached :data:`SLOWDOWN_REPORTED` (a slowdown between the two was never told, so its end is
    not told either)."""
    while upto > 0:
        level = model.slowdown(upto)
        if level < RECOVERED_BELOW:
            return False
        if level >= SLOWDOWN_REPORTED:
            return True
        upto -= 1
    return False


def candidate_limit(search, node, fixed_s: float) -> tuple[float, float | None]:
    """A candidate's own time limit: ``timeout_factor`` x the cost model's prediction of its
    run time (for a family none of whose nodes has finished yet, x :data:`UNSEEN_FAMILY_MARGIN`
    x the larger of the prediction and the prior), at least :data:`MIN_PREDICTED_LIMIT_S`, at
    most ``fixed_s`` (the run's limit of one candidate). A program without a recipe config (an LLM's, a baseline), an unknown model
    entry, or ``timeout_factor = 0`` gets ``fixed_s``.

    Returns:
        ``(limit_s, predicted_s)``; ``predicted_s`` is None when nothing was predicted.
    """
    from mcgs.knowledge_base import get_entry

    factor = search.settings.timeout_factor
    model = node.config.get("model")
    if factor <= 0 or not model or node.config.get("baseline"):
        return fixed_s, None
    try:
        get_entry(model)
    except KeyError:
        return fixed_s, None
    cost = run_cost_model(search)
    predicted = cost.predict_s(node.config, node.fidelity)
    if cost.has_observed(model):
        return min(fixed_s, max(MIN_PREDICTED_LIMIT_S, factor * predicted)), predicted
    # A family not seen to finish yet: the prediction is its prior, scaled by what other
    # families taught the calibration, and their errors are not its own.
    unseen = UNSEEN_FAMILY_MARGIN * max(predicted, cost.prior_s(node.config, node.fidelity))
    return min(fixed_s, max(MIN_PREDICTED_LIMIT_S, factor * unseen)), predicted


def prediction_error(pairs: Iterable[tuple[float, float]]) -> float | None:
    """Median ``|log(predicted / actual)|`` over ``(predicted, actual)`` pairs (0 = exact;
    log(2) = 0.69 = off by a factor of two); None without pairs."""
    errors = [abs(math.log(p / a)) for p, a in pairs if p > 0 and a > 0]
    return statistics.median(errors) if errors else None


def replay_run(run_dir) -> list[dict[str, Any]]:
    """The cost model replayed on a finished run, node by node: every node it learns from
    (:func:`cost_model_from_nodes`) is predicted at its fidelity by a
    :class:`CostModel` calibrated on the nodes before it, then observed.

    Args:
        run_dir: A run folder (``mcgs run --out``; its ``mcgs.db`` and ``profile.json``).

    Returns:
        One dict per such node, in node order: ``task``, ``model`` (knowledge entry id),
        ``fidelity``, ``prior`` (the uncalibrated prediction, s), ``predicted`` (calibrated, s),
        ``actual`` (measured run time, s).

    Raises:
        OSError: the folder has no ``profile.json``; errors of :func:`mcgs.snapshot.load_run`.
    """
    from mcgs.snapshot import load_run

    run_dir = Path(run_dir)
    snap = load_run(run_dir)
    profile = json.loads((run_dir / "profile.json").read_text())
    model = CostModel.for_task(profile, snap.task.validation)
    rows = []
    for node in _observable(snap.nodes):
        rows.append({"task": snap.task.name, "model": node.config["model"], "fidelity": node.fidelity,
                     "prior": model.prior_s(node.config, node.fidelity), "predicted": model.predict_s(node.config, node.fidelity),
                     "actual": node.runtime_s})
        model.observe(node.config, node.runtime_s, node.fidelity)
    return rows
