"""The curated knowledge base: entries as versioned YAML data, validated by schema.

Each entry (``entries/*.yaml``) has an id, a level (model, data or strategy), applicability
conditions on the task's data profile, guidance text, its source, and optionally a recipe the
offline coder turns into code (a Jinja2 template under ``recipes/``). Installed as
``mcgs.knowledge_base``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "KnowledgeEntry",
    "Recipe",
    "Applicability",
    "KnowledgeBaseError",
    "load_entries",
    "get_entry",
    "retrieve",
    "rank_entries",
    "profile_words",
    "template_environment",
    "ENTRIES_DIR",
    "RECIPES_DIR",
]

ENTRIES_DIR = Path(__file__).with_name("entries")
RECIPES_DIR = Path(__file__).with_name("recipes")


class KnowledgeBaseError(ValueError):
    """An entry file is malformed; the message names the file and the field."""


class ParamRange(BaseModel):
    """Search range of one model parameter, used by Improve."""

    model_config = ConfigDict(extra="forbid")
    low: float
    high: float
    log: bool = False
    int: bool = False


class ScaleParams(BaseModel):
    """Defaults of a model for larger data: from ``min_rows`` training rows, ``params`` replace
    the entry's defaults (a recipe's ``scale_params``; the last that applies wins)."""

    model_config = ConfigDict(extra="forbid")
    min_rows: int = Field(gt=0)
    params: dict[str, Any]


class Recipe(BaseModel):
    """How the offline recipe coder uses an entry.

    Attributes:
        kind: ``model`` (a model block), ``feature`` (a feature block) or ``strategy``.
        template: Jinja2 template file under ``recipes/`` (model and feature blocks).
        priority: Lower = tried earlier by Draft (models).
        relative_cost: Rough training cost relative to LightGBM defaults (1.0).
        params / space: Default parameters and their search ranges (models).
        scale_params: Defaults for larger data (:class:`ScaleParams`), in rising ``min_rows``.
        flag / default / value: The config switch a feature or strategy entry controls.
        always: The block is part of every program.
        interpretable: The fitted model is one a person can inspect (coefficients, neighbours);
            a task whose constraints ask for interpretability drafts only these.
        seeded: The model's fit depends on its random seed (bagging, row or column subsampling,
            random initialisation). Averaging seeds only helps these; for a deterministic
            model (a linear model fitted by lbfgs, k-NN, naive Bayes) it repeats one fit.
        family: Model class shared with other entries that differ only in their penalty or
            loss (``linear``: ridge, lasso / elastic net, logistic regression). Draft gives
            every family one draft before it spends a second draft on a family, so the drafts
            differ in kind (DESIGN §5). None = the entry is a family of its own.
        base: The program skeleton the model block is rendered into: ``solution.py.j2`` (a
            feature table, k-fold OOF predictions) or ``image_solution.py.j2`` (a network
            trained on the images themselves).
        requires: Modules the program imports beyond the engine's own dependencies (``torch``
            for a network: the ``vision`` extra); the recipe coder drafts the entry only where
            they are installed.
        sparse_features: A graph network that multiplies only the non-zero cells of the node
            features (a sparse first layer): the cost model counts its work in non-zero cells
            plus a fixed width per node (:meth:`mcgs.cost_model.CostModel.prior_s`), not in all
            cells.
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["model", "feature", "strategy"]
    template: str | None = None
    priority: int = 5
    relative_cost: float = 1.0
    params: dict[str, Any] = Field(default_factory=dict)
    space: dict[str, ParamRange] = Field(default_factory=dict)
    scale_params: list[ScaleParams] = Field(default_factory=list)
    flag: str | None = None
    default: Any = None
    value: Any = None
    always: bool = False
    interpretable: bool = False
    seeded: bool = True
    family: str | None = None
    base: str = "solution.py.j2"
    requires: list[str] = Field(default_factory=list)
    sparse_features: bool = False


class Applicability(BaseModel):
    """Conditions on the data profile under which an entry applies (all given ones must hold).

    Attributes:
        task_kinds, metrics: Allowed task kinds and metric names.
        min_rows, max_rows: Training rows.
        min_classes, max_classes: Number of classes (classification).
        max_minority_ratio: The rarest class's share of training rows times the number of
            classes is at most this (1 = balanced; 0.3 = the rarest class has under a third of
            its balanced share: imbalanced data).
        min_numeric_columns, min_categorical_columns: Feature columns of that kind.
        has_string_columns, has_text, has_datetime, has_missing: Presence of high-cardinality
            strings, free text, date/time columns, missing cells.
        time_indexed: The task's folds follow a time column (validation ``time_split``).
        min_target_skew: Regression target skew is at least this (heavy right tail).
        has_train_only_columns: The training table has columns the test table lacks.
        min_key_columns: Key columns (many levels, most repeated: ``key_columns`` of
            :func:`mcgs.profile.profile_task`).
        modalities: What the rows are: ``table`` (columns of values), ``image`` (a file per
            row), ``graph`` (the nodes of a graph) and / or ``forecast`` (a history of series: the
            profile's ``modality``). Left
            out: tables only. A graph task's rows are a table of node features too, but only
            the table entries that list ``graph`` apply to it: most table models and blocks
            spend minutes on thousands of propagated word columns for little.
        pretrained: A backbone whose weights the run has (the profile's ``pretrained_weights``,
            from the ``weights_dir`` setting).
    """

    model_config = ConfigDict(extra="forbid")
    task_kinds: list[str] = Field(default_factory=lambda: ["binary", "multiclass", "multilabel", "regression", "multi_target_regression"])
    metrics: list[str] | None = None
    min_rows: int | None = None
    max_rows: int | None = None
    min_classes: int | None = None
    max_classes: int | None = None
    max_minority_ratio: float | None = None
    min_numeric_columns: int | None = None
    min_categorical_columns: int | None = None
    has_string_columns: bool | None = None
    has_missing: bool | None = None
    has_text: bool | None = None
    has_datetime: bool | None = None
    time_indexed: bool | None = None
    min_target_skew: float | None = None
    has_train_only_columns: bool | None = None
    min_key_columns: int | None = None
    modalities: list[Literal["table", "image", "graph", "forecast"]] = Field(default_factory=lambda: ["table"])
    pretrained: str | None = None

    def failed(self, profile: dict[str, Any]) -> list[str]:
        """Names of the conditions that do not hold for ``profile`` (empty: the entry applies)."""
        p = profile
        checks = {
            "task_kinds": p["task_kind"] in self.task_kinds,
            "metrics": self.metrics is None or p["metric"] in self.metrics,
            "min_rows": self.min_rows is None or p["n_train"] >= self.min_rows,
            "max_rows": self.max_rows is None or p["n_train"] <= self.max_rows,
            "min_classes": self.min_classes is None or p.get("n_classes", 0) >= self.min_classes,
            "max_classes": self.max_classes is None or p.get("n_classes", 0) <= self.max_classes,
            "max_minority_ratio": self.max_minority_ratio is None or ("minority_share" in p and p["minority_share"] * p["n_classes"] <= self.max_minority_ratio),
            "min_numeric_columns": self.min_numeric_columns is None or p["n_numeric"] >= self.min_numeric_columns,
            "min_categorical_columns": self.min_categorical_columns is None or p["n_categorical"] >= self.min_categorical_columns,
            "has_string_columns": self.has_string_columns is None or (p["n_string"] > 0) == self.has_string_columns,
            "has_text": self.has_text is None or (p.get("n_text", 0) > 0) == self.has_text,
            "has_datetime": self.has_datetime is None or (p.get("n_datetime", 0) > 0) == self.has_datetime,
            "has_missing": self.has_missing is None or (p["missing_share"] > 0) == self.has_missing,
            "time_indexed": self.time_indexed is None or bool(p.get("time_indexed")) == self.time_indexed,
            "min_target_skew": self.min_target_skew is None or (p.get("target_skew") is not None and p["target_skew"] >= self.min_target_skew),
            "has_train_only_columns": self.has_train_only_columns is None or bool(p.get("train_only_columns")) == self.has_train_only_columns,
            "min_key_columns": self.min_key_columns is None or p.get("n_key_columns", 0) >= self.min_key_columns,
            "modalities": p.get("modality", "table") in self.modalities,
            "pretrained": self.pretrained is None or self.pretrained in p.get("pretrained_weights", ()),
        }
        return [k for k, ok in checks.items() if not ok]

    def matches(self, profile: dict[str, Any]) -> bool:
        """True when every condition holds for ``profile`` (see :func:`mcgs.profile.profile_task`)."""
        return not self.failed(profile)

    # Conditions that describe the data's character (not size or class-count guards).
    _SIGNALS = ("metrics", "max_minority_ratio", "min_categorical_columns", "has_string_columns", "has_missing",
                "has_text", "has_datetime", "time_indexed", "min_target_skew", "has_train_only_columns", "min_key_columns")

    def specificity(self) -> int:
        """How many conditions on the data's character (text, dates, time index, imbalance,
        skew, missing values, categories, metric) the entry sets; size and class-count limits
        are guards and do not count. A more specific entry that matches is a stronger
        recommendation."""
        return sum(getattr(self, k) not in (None, False) for k in self._SIGNALS)


class KnowledgeEntry(BaseModel):
    """One curated piece of know-how."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    version: int = 1
    level: Literal["model", "data", "strategy"]
    title: str
    applies_to: Applicability = Applicability()
    guidance: str
    source: str
    recipe: Recipe | None = None


@functools.lru_cache(maxsize=4)
def load_entries(directory: str | None = None) -> tuple[KnowledgeEntry, ...]:
    """Load and validate every ``*.yaml`` entry, sorted by id.

    Raises:
        KnowledgeBaseError: a file does not parse or breaks the schema; ids are duplicated;
            a recipe names a template that does not exist.
    """
    folder = Path(directory) if directory else ENTRIES_DIR
    entries: dict[str, KnowledgeEntry] = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            entry = KnowledgeEntry.model_validate(yaml.safe_load(path.read_text()))
        except yaml.YAMLError as exc:
            raise KnowledgeBaseError(f"knowledge entry {path} is not valid YAML: {exc}") from exc
        except ValidationError as exc:
            from mcgs._validation import describe_validation_error

            raise KnowledgeBaseError(f"knowledge entry {path} is invalid:\n" + describe_validation_error(exc, what="field")) from exc
        if entry.id in entries:
            raise KnowledgeBaseError(f"knowledge entry id {entry.id!r} is defined twice ({path})")
        if entry.recipe and entry.recipe.template and not (RECIPES_DIR / entry.recipe.template).is_file():
            raise KnowledgeBaseError(f"{path}: recipe template {entry.recipe.template!r} not found in {RECIPES_DIR}")
        entries[entry.id] = entry
    return tuple(sorted(entries.values(), key=lambda e: e.id))


def get_entry(entry_id: str) -> KnowledgeEntry:
    """Raises KeyError naming the id when unknown."""
    for e in load_entries():
        if e.id == entry_id:
            return e
    raise KeyError(f"no knowledge entry {entry_id!r}")


def retrieve(profile: dict[str, Any], level: str | None = None, recipe_kind: str | None = None) -> list[KnowledgeEntry]:
    """Entries whose applicability conditions hold for the profile.

    Args:
        profile: The task's data profile.
        level: Keep only this level.
        recipe_kind: Keep only entries whose recipe has this kind.

    Returns:
        Matching entries, ordered by recipe priority then id.
    """
    out = []
    for e in load_entries():
        if level and e.level != level:
            continue
        if recipe_kind and (e.recipe is None or e.recipe.kind != recipe_kind):
            continue
        if e.applies_to.matches(profile):
            out.append(e)
    return sorted(out, key=lambda e: (e.recipe.priority if e.recipe else 99, e.id))


def profile_words(profile: dict[str, Any]) -> str:
    """Plain words for what the profile says, so that lexical retrieval can match entries'
    guidance (e.g. a text column -> "free text words n-grams")."""
    words = [profile["task_kind"].replace("_", " "), profile["metric"].replace("_", " ")]
    if profile.get("n_text"):
        words.append("free text comments documents words characters n-grams vectorise")
    if profile.get("n_datetime"):
        words.append("date time timestamp calendar hour day week month")
    if profile.get("time_indexed"):
        words.append("time-indexed time series past future lags rolling forecast")
    if profile.get("n_categorical"):
        words.append("categorical categories levels encoding")
    if profile.get("missing_share", 0) > 0:
        words.append("missing values imputation")
    if profile.get("minority_share") is not None and profile["minority_share"] * profile["n_classes"] <= 0.3:
        words.append("imbalanced rare class")
    if profile.get("n_classes", 0) > 10:
        words.append("many classes")
    if profile.get("train_only_columns") or profile.get("leakage"):
        words.append("leakage train-only columns")
    if (profile.get("target_skew") or 0) > 1:
        words.append("skewed non-negative target counts log")
    return " ".join(words)


_TFIDF_CACHE: dict[tuple[str, ...], Any] = {}


def _tfidf(entries: tuple[KnowledgeEntry, ...]):
    key = tuple(e.id for e in entries)
    if key not in _TFIDF_CACHE:
        _TFIDF_CACHE[key] = _fit_tfidf(entries)
    return _TFIDF_CACHE[key]


def _fit_tfidf(entries: tuple[KnowledgeEntry, ...]):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(stop_words="english", sublinear_tf=True, ngram_range=(1, 2), min_df=1)
    matrix = vec.fit_transform([f"{e.title} {e.title} {e.guidance}" for e in entries])
    return vec, matrix


def rank_entries(
    profile: dict[str, Any],
    description: str = "",
    *,
    level: str | None = None,
    top_k: int | None = None,
) -> list[tuple[KnowledgeEntry, float]]:
    """Entries that apply to the profile, ranked for a task (AutoMLGen's knowledge retrieval;
    DESIGN §6).

    Score = 0.25 x specificity (how many profile conditions the entry sets and the task meets:
    an entry written for text tasks outranks a generic one on a text task) + the TF-IDF cosine
    similarity (scikit-learn ``TfidfVectorizer``, word 1-2-grams) between the entry's title
    and guidance and the task description plus :func:`profile_words`.

    Args:
        profile: The task's data profile (:func:`mcgs.profile.profile_task`).
        description: The task description or request text.
        level: Keep only ``model``, ``data`` or ``strategy`` entries.
        top_k: Return at most this many.

    Returns:
        ``[(entry, score)]``, best first; entries whose conditions fail are left out.
    """
    entries = load_entries()
    vec, matrix = _tfidf(entries)
    query = vec.transform([f"{description} {profile_words(profile)}"])
    sims = (matrix @ query.T).toarray().ravel()
    ranked = []
    for e, sim in zip(entries, sims):
        if (level and e.level != level) or not e.applies_to.matches(profile):
            continue
        ranked.append((e, round(0.25 * e.applies_to.specificity() + float(sim), 4)))
    ranked.sort(key=lambda t: (-t[1], t[0].id))
    return ranked[:top_k] if top_k else ranked


@functools.lru_cache(maxsize=1)
def template_environment():
    """The Jinja2 environment that renders recipe templates (strict about undefined names)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(RECIPES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
