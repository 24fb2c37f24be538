"""What a recipe config holds, how it is rendered into a program, and the small moves the
operators' recipe steps make on it (:mod:`mcgs.coders.recipe` is the coder that calls them).

A program is fully described by a small config::

    {"model": "model.lightgbm", "params": {...}, "features": {"split_compound": true, ...},
     "n_seeds": 1, "log_target": false, "seed": 0, "change": "what this node changed"}

and rendered from ``knowledge_base/recipes/solution.py.j2`` plus the model's and the enabled
feature blocks' templates. ``change`` names the move that made the config (``param:NAME:up``,
``feature:FLAG``, ``strategy:...``, ``debug:...``), so an operator can avoid a move a sibling
already made.
"""

from __future__ import annotations

import copy
import random
from typing import TYPE_CHECKING, Any, Callable, Iterable

from mcgs.contract import CONTRACT_VERSION
from mcgs.knowledge_base import KnowledgeEntry, get_entry, retrieve, template_environment
from mcgs.media import commonest_size
from mcgs.node import FrozenNode
from mcgs.profile import MAX_CATEGORIES, TEXT_MIN_WORDS

if TYPE_CHECKING:
    from mcgs.coders import CoderRequest

__all__ = [
    "FEATURE_ORDER", "TABLE_BASE", "MAX_IMAGE_SIZE", "COST_PARAMS", "BOOSTED_TREES", "READS_TEXT", "feature_entries", "model_entries", "family", "default_config",
    "render_program", "mutate_params", "toggle_feature", "changes", "last_line",
    "written_by_recipe", "parent_not_recipe", "no_recipe_input",
]

# Feature blocks in the order they run; each is controlled by a config flag.
FEATURE_ORDER = (
    "datetime_parts", "cyclical_time", "covariate_lags", "text_stats", "text_content",
    "split_compound", "count_encoding", "row_aggregates", "power_transform", "missing_indicators",
    "target_encoding", "graph_propagation", "image_features", "augment", "tta",
)
#: The skeleton of a program whose model reads a feature table (every table model).
TABLE_BASE = "solution.py.j2"
#: The skeleton of an image network's program.
IMAGE_BASE = "image_solution.py.j2"
#: The skeleton of a forecasting program (search mode and forecast mode: mcgs.forecast).
FORECAST_BASE = "forecast_solution.py.j2"
#: Longest side an image network's program resizes images to (a larger image is shrunk to it).
MAX_IMAGE_SIZE = 128
#: Models that read the text columns themselves (their own n-grams): feature blocks that turn
#: text into table columns (``text_content``) start off for them.
READS_TEXT = frozenset({"model.tfidf_linear", "model.naive_bayes_text"})
# Gradient-boosted tree models: their templates stop early on rows held out of each training
# fold, and on a multi-class task they grow one tree per class per round.
BOOSTED_TREES = frozenset({"model.lightgbm", "model.catboost", "model.hist_gradient_boosting"})
# Boosted models whose templates boost again on the whole training fold after stopping early.
REFIT_AFTER_STOPPING = frozenset({"model.lightgbm", "model.catboost"})
# Parameters that scale a model's training cost linearly (halved by Debug on timeouts).
COST_PARAMS = ("n_estimators", "iterations", "max_iter", "epochs")
#: From this many rows (training plus test) a recipe program holds its numeric features as
#: float32 (issue 33 §5: memory sized to the data); below it, float64 as read.
FLOAT32_ROWS = 100_000


def feature_entries(profile: dict[str, Any], base: str | None = None) -> dict[str, KnowledgeEntry]:
    """The feature-block entries that apply to a data profile, by their config flag; with
    ``base``, only the blocks of that program skeleton (a table model's or an image network's)."""
    return {e.recipe.flag: e for e in retrieve(profile, recipe_kind="feature") if e.recipe.flag and (base is None or e.recipe.base == base)}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported by the interpreter that runs candidates (the engine's)."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


def model_entries(profile: dict[str, Any]) -> list[KnowledgeEntry]:
    """The model entries that apply to a data profile and whose required modules are installed
    (``recipe.requires``: a network needs the ``vision`` extra's PyTorch)."""
    return [e for e in retrieve(profile, recipe_kind="model") if all(installed(m) for m in e.recipe.requires)]


def family(entry: KnowledgeEntry) -> str:
    """The model family an entry belongs to (its own id unless it declares one)."""
    return (entry.recipe.family if entry.recipe else None) or entry.id


def _fmt(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.4g}")
    return v


def default_config(model_id: str, profile: dict[str, Any]) -> dict[str, Any]:
    """The default config of a model entry: its default params (with its ``scale_params`` for
    the profile's training rows) and default feature blocks.

    Raises:
        KeyError: unknown model entry id.
    """
    entry = get_entry(model_id)
    params = dict(entry.recipe.params)
    for scale in entry.recipe.scale_params:
        if (profile.get("n_train") or 0) >= scale.min_rows:
            params.update(scale.params)
    season = (profile.get("forecast") or {}).get("seasonal_period")
    if "period" in params and season:  # a seasonal model's period: the profile's strongest season
        params["period"] = int(season)
    feats = feature_entries(profile)
    features = {flag: bool(feats[flag].recipe.default) if flag in feats else False for flag in FEATURE_ORDER}
    if model_id in READS_TEXT:
        features["text_content"] = False
    return {
        "model": model_id,
        "params": params,
        "features": features,
        "n_seeds": 1,
        "log_target": profile.get("metric") in ("rmsle", "mean_column_rmsle"),
        "change": "draft",
    }


def render_program(config: dict[str, Any], *, title: str, plan: str, profile: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """Render a config into a standalone ``solution.py`` (numeric features as float32 from
    :data:`FLOAT32_ROWS` rows of the profile's training and test tables), in its model's
    skeleton (``recipe.base``) with the enabled feature blocks of that skeleton; an image
    network's program resizes images to the profile's commonest size, at most
    :data:`MAX_IMAGE_SIZE` a side.

    Returns:
        ``(code, knowledge_ids)``.

    Raises:
        KeyError: unknown model entry id in the config.
    """
    model = get_entry(config["model"])
    base = model.recipe.base
    feats = feature_entries(profile, base)
    blocks = ["fe_base.py.j2"] if base == TABLE_BASE else []
    ids = ["data.column_types"] if base == TABLE_BASE else []
    for flag in FEATURE_ORDER:
        if config["features"].get(flag) and flag in feats:
            blocks.append(feats[flag].recipe.template)
            ids.append(feats[flag].id)
    ids += [model.id] if base == FORECAST_BASE else [model.id, "strategy.kfold_oof"]
    if base == IMAGE_BASE:
        ids.append("strategy.mixed_precision")
    if model.id in BOOSTED_TREES:
        ids.append("strategy.early_stopping")
    if model.id in REFIT_AFTER_STOPPING:
        ids.append("strategy.full_data_refit")
    if config.get("n_seeds", 1) > 1:
        ids.append("strategy.seed_averaging")
    if config.get("log_target"):
        ids.append("strategy.log_target")
    params = {k: _fmt(v) for k, v in config["params"].items()}
    media = profile.get("media") or {}
    code = template_environment().get_template(base).render(
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
        key_columns=repr(list(profile.get("key_columns", []))),
        float32=(profile.get("n_train") or 0) + (profile.get("n_test") or 0) >= FLOAT32_ROWS,
        image_size=max(8, min(MAX_IMAGE_SIZE, max(commonest_size(media, default=(0, 0))))),
        channels=1 if media.get("channels") == 1 else 3,
        orientation_free=bool(media.get("orientation_free")),
    )
    return code, tuple(ids)


def mutate_params(config: dict[str, Any], entry: KnowledgeEntry, rng: random.Random, avoid: Iterable[str],
                  weigh: Callable[[dict[str, Any]], float] | None = None) -> tuple[dict[str, Any], str]:
    """One parameter of the model's search space moved up or down (a copy of ``config``):
    by a factor of 1.4-2.2 on log-scaled ranges, by 15-30 % of the range otherwise, clipped to
    the range. A move named in ``avoid`` (``param:NAME:up``) is skipped while another is left.
    Boosting's rounds follow a learning-rate move in inverse proportion.

    Without ``weigh`` one move is drawn uniformly. With ``weigh`` (a moved config -> a weight
    >= 0: Improve's expected gain per second, :func:`operators.improve.gain_per_second`) every
    move is drawn and one is picked with probability proportional to its weight (uniformly when
    every weight is 0).

    Returns:
        ``(new config, what changed)``.
    """
    avoid = set(avoid)
    space = entry.recipe.space
    names = [n for n in space if n in config["params"]]
    options = [(n, d) for n in names for d in ("up", "down")]
    fresh = [o for o in options if f"param:{o[0]}:{o[1]}" not in avoid] or options
    if weigh is None:
        return _moved(config, entry, *rng.choice(fresh), rng)
    moves = [_moved(config, entry, name, direction, rng) for name, direction in fresh]
    weights = [max(0.0, weigh(c)) for c, _ in moves]
    return rng.choices(moves, weights=weights)[0] if sum(weights) > 0 else rng.choice(moves)


def _moved(config: dict[str, Any], entry: KnowledgeEntry, name: str, direction: str, rng: random.Random) -> tuple[dict[str, Any], str]:
    """``config`` with parameter ``name`` moved ``direction`` (``up``/``down``) by a random step
    (:func:`mutate_params`), and what changed."""
    rng_def = entry.recipe.space[name]
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
        space = entry.recipe.space
        for cost in COST_PARAMS:
            if cost in out["params"] and cost in space:
                r = space[cost]
                scaled = out["params"][cost] * (old / new) if new else out["params"][cost]
                out["params"][cost] = int(min(max(round(scaled), r.low), r.high))
    out["change"] = f"param:{name}:{direction}"
    return out, f"change {name} {old} -> {new}"


def toggle_feature(config: dict[str, Any], profile: dict[str, Any], rng: random.Random, avoid: Iterable[str]) -> str | None:
    """Switch one applicable feature block not toggled in ``avoid`` (in place), never one that is
    part of every program (``recipe.always``: an image task's features for a table model);
    returns what was done, or None when every block was tried."""
    avoid = set(avoid)
    feats = feature_entries(profile, get_entry(config["model"]).recipe.base)
    toggles = [f for f in FEATURE_ORDER if f in feats and not feats[f].recipe.always and f"feature:{f}" not in avoid]
    if not toggles:
        return None
    flag = rng.choice(toggles)
    config["features"][flag] = not config["features"].get(flag, False)
    config["change"] = f"feature:{flag}"
    return f"{'add' if config['features'][flag] else 'remove'} feature block {feats[flag].title!r}"


def changes(nodes: Iterable[FrozenNode]) -> set[str]:
    """The ``change`` names of the nodes' configs (the moves already made)."""
    return {str(n.config.get("change", "")) for n in nodes}


def last_line(text: str) -> str:
    """The last non-empty line of an error text, at most 200 characters."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "unknown error"


def written_by_recipe(n: FrozenNode | None) -> bool:
    """Whether ``n`` holds a recipe config the recipe coder can build on (a baseline script
    or an LLM's program does not)."""
    return n is not None and bool(n.config.get("model"))


def parent_not_recipe(req: "CoderRequest") -> str | None:
    """Why the recipe coder cannot change ``req.parent`` (Debug, Improve, Evolve), or None."""
    if written_by_recipe(req.parent):
        return None
    return f"node {req.parent.seq if req.parent else '?'} was not written by the recipe coder"


def no_recipe_input(inputs: Iterable[FrozenNode | None]) -> str | None:
    """Why the recipe coder cannot merge ``inputs`` (Fusion, Aggregate): none is valid with a
    recipe config; or None."""
    if any(written_by_recipe(n) and n.is_valid for n in inputs):
        return None
    return "none of the inputs was written by the recipe coder"
