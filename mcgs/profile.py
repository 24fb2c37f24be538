"""Data profile: the facts about a task's tables that knowledge retrieval and coders use.

Column kinds are inferred from values, never from names (names are read only to flag
columns named like the target). The profile is stored with the run (``profile.json``) and
shown to coders. Columns absent from the test table are listed as ``train_only_columns`` and
are never features.
"""

from __future__ import annotations

import re
from typing import Any

from mcgs.task import TaskSpec, read_table

__all__ = ["profile_task", "is_datetime_column", "normalise_name", "MAX_CATEGORIES", "TEXT_MIN_WORDS", "DRIFT_THRESHOLD"]

# A string column with at most this many distinct values counts as categorical.
MAX_CATEGORIES = 50
# A string column whose values average at least this many words counts as free text.
TEXT_MIN_WORDS = 3
# Per-column train/test drift above this (Kolmogorov-Smirnov statistic for numbers, total
# variation distance for categories) is reported as drift -- or above the two-sample KS
# critical value at alpha = 0.001, 1.95 * sqrt((n + m) / (n m)), when that is larger (small
# tables differ by chance more than large ones).
DRIFT_THRESHOLD = 0.1
# A numeric feature whose absolute correlation with a regression target (or a binary
# target's 0/1 coding) reaches this is a leakage suspect.
LEAK_CORRELATION = 0.98
# Rows used for the pairwise checks (near-duplicate columns), to bound the cost.
SAMPLE_ROWS = 5000
# Key columns (a level's mean target may be informative; knowledge entry
# data.target_encoding_in_folds): a string column of more levels than a category may have
# (MAX_CATEGORIES: the recipes take it only through counts and parts), or an integer column of at
# least KEY_MIN_INT_LEVELS distinct values (a user or item id read as a number, or a measurement:
# the recipe program tells them apart with the labels), in both cases with at least
# KEY_MIN_REPEATED of the training rows holding a value that occurs more than once. A column of
# fewer levels is a category that the models take themselves.
KEY_MIN_INT_LEVELS = 100
KEY_MIN_REPEATED = 0.5


def is_datetime_column(s) -> bool:
    """True when a string column parses as dates or times for more than 95 % of its first
    200 non-missing values (and they look like dates: digits joined by ``-``, ``/`` or ``:``)."""
    import pandas as pd

    if not (s.dtype == object or pd.api.types.is_string_dtype(s)):
        return False
    vals = s.dropna().astype(str).head(200)
    if vals.empty or not vals.str.contains(r"\d{1,4}[-/:]\d{1,2}").all():
        return False
    parsed = pd.to_datetime(vals, errors="coerce", format="mixed")
    return bool(parsed.notna().mean() > 0.95)


def _kind(s, n_rows: int) -> str:
    import pandas as pd

    lowered = set(s.dropna().astype(str).str.lower().unique()[:3])
    if lowered and lowered <= {"true", "false"} and s.dropna().astype(str).str.lower().isin(["true", "false"]).all():
        return "boolean"
    unique_per_row = s.notna().all() and s.nunique() == n_rows and n_rows > 20
    if pd.api.types.is_numeric_dtype(s):
        integral = pd.api.types.is_integer_dtype(s) or bool((s.dropna() % 1 == 0).all())
        if unique_per_row and integral and (s.is_monotonic_increasing or s.max() - s.min() + 1 == n_rows):
            return "id_like"  # a row counter
        return "numeric"
    if is_datetime_column(s):
        return "datetime"
    if s.nunique() <= MAX_CATEGORIES:
        return "categorical"
    words = s.dropna().astype(str).str.split().str.len().mean()
    if words >= TEXT_MIN_WORDS:
        return "text"
    if unique_per_row:
        return "id_like"
    return "string"


def _is_key(s, kind: str) -> bool:
    """Whether a feature column is a key (see :data:`KEY_MIN_INT_LEVELS`): many levels, most repeated."""
    values = s.dropna()
    if kind == "numeric":
        if values.nunique() < KEY_MIN_INT_LEVELS or not bool((values % 1 == 0).all()):
            return False
    elif kind != "string":
        return False
    return float(values.duplicated(keep=False).mean()) >= KEY_MIN_REPEATED


def _drift(tr, te, kind: str) -> float | None:
    """Train/test shift of one column: KS statistic (numeric) or total variation distance."""
    import pandas as pd

    a, b = tr.dropna(), te.dropna()
    if a.empty or b.empty:
        return None
    if kind == "numeric":
        from scipy.stats import ks_2samp

        return float(ks_2samp(a.astype(float), b.astype(float)).statistic)
    if kind in ("categorical", "boolean"):
        p = a.astype(str).value_counts(normalize=True)
        q = b.astype(str).value_counts(normalize=True)
        both = pd.concat([p, q], axis=1).fillna(0.0)
        return float(0.5 * (both.iloc[:, 0] - both.iloc[:, 1]).abs().sum())
    return None


def normalise_name(name: str) -> str:
    """A column name without case, spaces, dashes or underscores, for matching names."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _leakage(train, feats: list[str], kinds: dict[str, str], spec: TaskSpec, train_only: list[str]) -> list[dict[str, str]]:
    """Leakage suspicions: train-only columns, columns named like the target, features that
    (nearly) determine the target, and near-duplicate feature columns."""
    import numpy as np
    import pandas as pd

    out = [{"column": c, "reason": "in the training table but not in the test table: never a feature"} for c in train_only]
    targets = {normalise_name(t) for t in spec.target_columns}
    for c in feats:
        n = normalise_name(c)
        if any(t and t in n for t in targets if len(t) >= 3):
            out.append({"column": c, "reason": "named like the target"})
    sample = train.sample(min(len(train), SAMPLE_ROWS), random_state=0) if len(train) > SAMPLE_ROWS else train
    if spec.task_kind in ("regression", "binary"):
        t = sample[spec.target_columns[0]]
        y = t.astype(float) if spec.task_kind == "regression" else (t.astype(str) == str(spec.positive_class)).astype(float)
        for c in feats:
            if kinds[c] in ("numeric", "boolean") and sample[c].nunique() > 1:
                x = pd.to_numeric(sample[c].astype(str).str.lower().replace({"true": "1", "false": "0"}), errors="coerce")
                r = x.replace([np.inf, -np.inf], np.nan).corr(y)
                if r is not None and np.isfinite(r) and abs(r) >= LEAK_CORRELATION:
                    out.append({"column": c, "reason": f"correlation {r:+.3f} with the target: a copy or a function of it?"})
    if spec.task_kind in ("binary", "multiclass"):
        t = sample[spec.target_columns[0]].astype(str)
        for c in feats:
            if kinds[c] == "categorical" and 1 < sample[c].nunique() < len(sample) // 5:
                purity = t.groupby(sample[c].astype(str)).agg(lambda v: v.value_counts(normalize=True).iloc[0])
                weight = sample[c].astype(str).value_counts(normalize=True)
                if float((purity * weight.reindex(purity.index)).sum()) >= 0.995 and t.nunique() > 1:
                    out.append({"column": c, "reason": "each of its values maps to a single class: a copy of the target?"})
        for c in feats:
            # a placeholder-or-value column (pizza's giver_username_if_known: "N/A" or a name)
            # whose non-placeholder rows all carry one class
            if kinds[c] in ("string", "id_like", "categorical") and sample[c].nunique() > 2:
                top = sample[c].astype(str).value_counts()
                rest = sample[c].astype(str) != top.index[0]
                if top.iloc[0] >= 0.5 * len(sample) and rest.mean() >= 0.02 and t[rest].nunique() == 1 and t.nunique() > 1:
                    out.append({"column": c, "reason": f"rows where it is not {top.index[0]!r} ({rest.mean():.0%}) all have class {t[rest].iloc[0]!r}: a leak?"})
    nums = [c for c in feats if kinds[c] == "numeric" and sample[c].nunique() > 1]
    if 1 < len(nums) <= 300:
        corr = sample[nums].corr().abs().to_numpy()
        iu = np.triu_indices(len(nums), k=1)
        for i, j in zip(*iu):
            if corr[i, j] >= 0.999:
                out.append({"column": nums[j], "reason": f"near-duplicate of {nums[i]} (correlation {corr[i, j]:.4f})"})
    return out


#: Words of a task's description that say its images are seen from above or through a
#: microscope, where no side is up (knowledge entry data.image_augmentation).
ORIENTATION_FREE_WORDS = re.compile(
    r"\b(aerial|satellite|overhead|drone|top-down|bird's-eye|remote sensing|microscop\w*|histolog\w*|histopatholog\w*|"
    r"patholog\w*|tissue|cells?|slides?|galax\w*|telescope)\b", re.IGNORECASE)


def orientation_free(description: str) -> bool:
    """Whether a task's description says its images have no upright orientation (overhead or
    microscope views: :data:`ORIENTATION_FREE_WORDS`), so flips and quarter turns keep labels."""
    return bool(ORIENTATION_FREE_WORDS.search(description or ""))


def profile_task(spec: TaskSpec) -> dict[str, Any]:
    """Profile a task's public training and test tables.

    Returns:
        A JSON-able dict:

        * ``task_kind``, ``metric``, ``n_train``, ``n_test``, ``time_indexed`` (folds follow a
          time column), ``constraints`` (from the request);
        * ``columns`` {name: kind}, kinds being numeric, boolean, categorical, datetime, text,
          id_like (unique per row: a row counter or key) or string (other high-cardinality
          strings); counts ``n_features``, ``n_numeric`` (numeric and boolean),
          ``n_categorical``, ``n_string`` (string, text and id_like), ``n_text``,
          ``n_datetime``; ``key_columns`` (string or integer columns of many levels, most of
          them repeated: :data:`KEY_MIN_INT_LEVELS`) and ``n_key_columns``;
        * ``missing_share`` (share of missing cells in the feature columns), ``missing``
          {column: share} and ``cardinality`` {column: distinct values} per feature column;
        * target: ``n_classes``, ``class_shares`` and ``minority_share`` (classification),
          ``label_shares``, ``n_labels`` and ``labels_per_row`` (multi-label),
          ``target_mean``, ``target_std``, ``target_min`` and ``target_skew``
          (regression; first target);
        * ``drift`` {column: statistic} and ``drifted_columns`` (statistic above
          :data:`DRIFT_THRESHOLD`, or above the KS critical value for small tables);
        * ``train_only_columns`` (never features) and ``leakage`` [{column, reason}];
        * ``modality`` (``table``, ``image`` or ``graph``) and, for an image task, ``media``: the files'
          count, formats, modes, channels, sizes and sampled pixel statistics
          (:func:`mcgs.media.describe_media`) and ``orientation_free`` (:func:`orientation_free`);
          the column naming the files is not a feature; for a graph task, ``graph``: nodes,
          edges, degrees and label homophily (:func:`mcgs.graph_task.describe_graph`); a forecast's: :func:`_forecast_profile`.
    """
    if spec.forecast is not None:
        return _forecast_profile(spec)
    train = read_table(spec.train_path)
    test = read_table(spec.test_path)
    # the id is not a feature, unless it is a timestamp (bike-sharing's datetime): then its
    # calendar parts are
    id_is_time = spec.id_column in train.columns and is_datetime_column(train[spec.id_column])
    # nor are an image task's file names, nor a predefined split's fold column (the split itself,
    # which every program reads from input/folds.csv)
    feats = [c for c in train.columns if c not in spec.target_columns and (c != spec.id_column or id_is_time)
             and not (spec.media is not None and c == spec.media.column) and c != spec.validation.fold_column]
    train_only = [c for c in feats if c not in test.columns]
    feats = [c for c in feats if c in test.columns]
    kinds = {c: _kind(train[c], len(train)) for c in feats}
    if id_is_time:
        kinds[spec.id_column] = "datetime"
    drift = {}
    for c in feats:
        d = _drift(train[c], test[c], kinds[c])
        if d is not None:
            drift[c] = round(d, 4)
    n, m = max(len(train), 1), max(len(test), 1)
    keys = [c for c in feats if _is_key(train[c], kinds[c])]
    drift_bar = max(DRIFT_THRESHOLD, 1.95 * ((n + m) / (n * m)) ** 0.5)
    out: dict[str, Any] = {
        "task_kind": spec.task_kind,
        "metric": spec.metric,
        "n_train": len(train),
        "n_test": len(test),
        "time_indexed": spec.validation.kind == "time_split",
        "n_features": len(feats),
        "n_numeric": sum(k in ("numeric", "boolean") for k in kinds.values()),
        "n_categorical": sum(k == "categorical" for k in kinds.values()),
        "n_string": sum(k in ("string", "text", "id_like") for k in kinds.values()),
        "n_text": sum(k == "text" for k in kinds.values()),
        "n_datetime": sum(k == "datetime" for k in kinds.values()),
        "key_columns": keys,
        "n_key_columns": len(keys),
        "missing_share": float(train[feats].isna().mean().mean()) if feats else 0.0,
        "columns": kinds,
        "missing": {c: round(float(train[c].isna().mean()), 4) for c in feats},
        "cardinality": {c: int(train[c].nunique()) for c in feats},
        "drift": drift,
        "drifted_columns": sorted(c for c, d in drift.items() if d > drift_bar),
        "train_only_columns": train_only,
        "leakage": _leakage(train, feats, kinds, spec, train_only),
        "constraints": spec.constraints.model_dump(),
    }
    out.update(_modality_profile(spec, train, test))
    out.update(_target_profile(spec, train))
    return out


def _forecast_profile(spec: TaskSpec) -> dict[str, Any]:
    """A forecasting task's profile: the table keys every entry's applicability reads, each
    series a numeric column of the training rows, and ``forecast``
    (:func:`mcgs.forecast.describe_forecast`)."""
    from mcgs.forecast import describe_forecast, read_series

    f = spec.forecast
    _, values = read_series(spec.data_dir, f, f.train_end)
    return {
        "task_kind": "forecast", "metric": spec.metric, "modality": "forecast", "n_train": f.train_end, "n_test": spec.n_test,
        "time_indexed": True, "n_features": len(f.inputs), "n_numeric": len(f.inputs), "n_categorical": 0, "n_string": 0, "n_text": 0,
        "n_datetime": 1, "key_columns": [], "n_key_columns": 0, "missing_share": 0.0, "columns": {c: "numeric" for c in f.inputs},
        "missing": {}, "cardinality": {}, "drift": {}, "drifted_columns": [], "train_only_columns": [], "leakage": [],
        "constraints": spec.constraints.model_dump(), "forecast": describe_forecast(f, values),
    }


def _modality_profile(spec: TaskSpec, train, test) -> dict[str, Any]:
    """``modality`` and, for an image task, ``media``, for a graph task, ``graph``."""
    if spec.media is not None:
        return {"modality": spec.media.kind, "media": _media_profile(spec, train, test)}
    if spec.graph is not None:
        from mcgs.graph_task import describe_graph

        return {"modality": "graph", "graph": describe_graph(spec.data_dir, spec.graph, spec.id_column, train, test, spec.target_columns[0])}
    return {"modality": "table"}


def _media_profile(spec: TaskSpec, train, test) -> dict[str, Any]:
    """An image task's ``media`` entry: :func:`mcgs.media.describe_media` and :func:`orientation_free`."""
    from mcgs.media import describe_media

    col = spec.media.column
    out = describe_media(spec.data_dir, spec.media, train[col].astype(str).tolist(), test[col].astype(str).tolist())
    return out | {"orientation_free": orientation_free(spec.description)}


def _target_profile(spec: TaskSpec, train) -> dict[str, Any]:
    """The target's part of :func:`profile_task`: class shares (classification), label shares
    (multi-label), or the first target's mean, spread, minimum and skew (regression)."""
    import pandas as pd

    if spec.task_kind in ("binary", "multiclass"):
        shares = train[spec.target_columns[0]].value_counts(normalize=True)
        return {"n_classes": int(len(shares)), "minority_share": float(shares.min()),
                "class_shares": {str(k): round(float(v), 4) for k, v in shares.items()}}
    if spec.task_kind == "multilabel":
        pos = {t: float(train[t].astype(str).str.lower().isin(["1", "true", "1.0"]).mean()) for t in spec.target_columns}
        return {"label_shares": {t: round(v, 4) for t, v in pos.items()}, "n_labels": len(pos), "labels_per_row": round(sum(pos.values()), 3)}
    t = pd.to_numeric(train[spec.target_columns[0]], errors="coerce")
    return {"target_mean": float(t.mean()), "target_std": float(t.std()), "target_min": float(t.min()),
            "target_skew": float(t.skew()) if len(t) > 2 else 0.0}
