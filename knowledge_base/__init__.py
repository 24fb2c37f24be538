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


class Recipe(BaseModel):
    """How the offline recipe coder uses an entry.

    Attributes:
        kind: ``model`` (a model block), ``feature`` (a feature block) or ``strategy``.
        template: Jinja2 template file under ``recipes/`` (model and feature blocks).
        priority: Lower = tried earlier by Draft (models).
        relative_cost: Rough training cost relative to LightGBM defaults (1.0).
        params / space: Default parameters and their search ranges (models).
        flag / default / value: The config switch a feature or strategy entry controls.
        always: The block is part of every program.
        interpretable: The fitted model is one a person can inspect (coefficients, neighbours);
            a task whose constraints ask for interpretability drafts only these.
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["model", "feature", "strategy"]
    template: str | None = None
    priority: int = 5
    relative_cost: float = 1.0
    params: dict[str, Any] = Field(default_factory=dict)
    space: dict[str, ParamRange] = Field(default_factory=dict)
    flag: str | None = None
    default: Any = None
    value: Any = None
    always: bool = False
    interpretable: bool = False


class Applicability(BaseModel):
    """Conditions on the data profile under which an entry applies (all must hold)."""

    model_config = ConfigDict(extra="forbid")
    task_kinds: list[str] = Field(default_factory=lambda: ["binary", "multiclass", "regression", "multi_target_regression"])
    metrics: list[str] | None = None
    min_rows: int | None = None
    max_rows: int | None = None
    max_classes: int | None = None
    min_numeric_columns: int | None = None
    has_string_columns: bool | None = None
    has_missing: bool | None = None
    has_text: bool | None = None

    def matches(self, profile: dict[str, Any]) -> bool:
        """True when every condition holds for ``profile`` (see :func:`mcgs.profile.profile_task`)."""
        if profile["task_kind"] not in self.task_kinds:
            return False
        if self.metrics is not None and profile["metric"] not in self.metrics:
            return False
        if self.min_rows is not None and profile["n_train"] < self.min_rows:
            return False
        if self.max_rows is not None and profile["n_train"] > self.max_rows:
            return False
        if self.max_classes is not None and profile.get("n_classes", 0) > self.max_classes:
            return False
        if self.min_numeric_columns is not None and profile["n_numeric"] < self.min_numeric_columns:
            return False
        if self.has_string_columns is not None and (profile["n_string"] > 0) != self.has_string_columns:
            return False
        if self.has_text is not None and (profile.get("n_text", 0) > 0) != self.has_text:
            return False
        if self.has_missing is not None and (profile["missing_share"] > 0) != self.has_missing:
            return False
        return True


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
        except (yaml.YAMLError, ValidationError) as exc:
            raise KnowledgeBaseError(f"knowledge entry {path} is invalid: {exc}") from exc
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
