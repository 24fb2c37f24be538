"""Data profile v0: the facts about a task's tables that knowledge retrieval and coders use.

Column kinds are inferred from values, never from names. The profile is stored with the run.
"""

from __future__ import annotations

from typing import Any

from mcgs.task import TaskSpec, read_table

__all__ = ["profile_task"]

# A string column with at most this many distinct values counts as categorical.
MAX_CATEGORIES = 50
# A string column whose values average at least this many words counts as free text.
TEXT_MIN_WORDS = 3


def profile_task(spec: TaskSpec) -> dict[str, Any]:
    """Profile a task's public training and test tables.

    Returns:
        A JSON-able dict with ``task_kind``, ``metric``, ``n_train``, ``n_test``,
        ``n_features``, ``n_numeric``, ``n_categorical``, ``n_string`` (high-cardinality
        strings: identifiers or text), ``n_text`` (free-text columns), ``missing_share`` (share of missing cells in the
        feature columns), ``n_classes`` and ``minority_share`` (classification), and
        ``columns``: {name: kind}. Columns absent from the test file are listed under
        ``train_only_columns`` and are not features.
    """
    import pandas as pd

    train = read_table(spec.train_path)
    test = read_table(spec.test_path)
    feats = [c for c in train.columns if c not in spec.target_columns and c != spec.id_column]
    train_only = [c for c in feats if c not in test.columns]
    feats = [c for c in feats if c in test.columns]
    kinds: dict[str, str] = {}
    for c in feats:
        s = train[c]
        lowered = set(s.dropna().astype(str).str.lower().unique())
        if lowered and lowered <= {"true", "false"}:
            kinds[c] = "boolean"
        elif pd.api.types.is_numeric_dtype(s):
            kinds[c] = "numeric"
        elif s.nunique() <= MAX_CATEGORIES:
            kinds[c] = "categorical"
        elif s.dropna().astype(str).str.split().str.len().mean() >= TEXT_MIN_WORDS:
            kinds[c] = "text"
        else:
            kinds[c] = "string"
    out: dict[str, Any] = {
        "task_kind": spec.task_kind,
        "metric": spec.metric,
        "n_train": len(train),
        "n_test": len(test),
        "n_features": len(feats),
        "n_numeric": sum(k in ("numeric", "boolean") for k in kinds.values()),
        "n_categorical": sum(k == "categorical" for k in kinds.values()),
        "n_string": sum(k in ("string", "text") for k in kinds.values()),
        "n_text": sum(k == "text" for k in kinds.values()),
        "missing_share": float(train[feats].isna().mean().mean()) if feats else 0.0,
        "columns": kinds,
        "train_only_columns": train_only,
        "constraints": spec.constraints.model_dump(),
    }
    if spec.task_kind in ("binary", "multiclass"):
        shares = train[spec.target_columns[0]].value_counts(normalize=True)
        out["n_classes"] = int(len(shares))
        out["minority_share"] = float(shares.min())
    return out
