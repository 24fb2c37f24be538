"""The other side of ``mcgs bench``: LightGBM with default parameters, LightGBM tuned by Optuna,
and FLAML's AutoML, each fitted on the same plain featurisation of a task's public tables.

Each competitor runs in its own process (``python -m mcgs.mlebench.competitors NAME ...``, started
by :mod:`mcgs.mlebench.bench`), with the wall budget it is given and the same number of threads
as the mcgs search, and writes ``OUT/submission.csv`` in the sample submission's format plus
``OUT/result.json`` (what it fitted and how long each stage took).

Featurisation (:func:`plain_features`), identical for all three: the columns present in both
train and test except the id and the targets (a train-only column is never a feature); numbers
and booleans as they are; short strings as categories (integer codes over train + test, missing
stays missing); long strings (a mean of five words or more: free text, and the joined lists of
JSON records) as TF-IDF word unigrams and bigrams (at most 20 000 per column, sublinear term
frequency). With text the matrix is sparse (CSR), otherwise a pandas frame with ``category``
columns (LightGBM's and FLAML's native categorical handling). The task's metric decides one
transform: for RMSLE-type metrics every model is fitted on ``log1p(y)`` with squared error and
predicts ``expm1`` (the same optimum). Nothing here is tuned to a competition.

Tuning details:

* **lightgbm** - ``LGBMClassifier`` / ``LGBMRegressor`` with the library defaults (100 trees,
  31 leaves, learning rate 0.1), ``random_state`` = seed.
* **optuna** - TPE sampler (Bergstra et al. 2011; Optuna's default, Akiba et al. KDD 2019) over
  LightGBM's usual ranges (leaves 7-255, learning rate 0.01-0.3, 100-1000 trees, minimum child
  samples 5-100, row and column subsampling 0.5-1, L2 1e-3-10), each trial scored by 3-fold
  cross-validation with the task's metric; trials until 85 % of the budget is spent (the
  rest is for the refit on all rows), then the best parameters refitted.
* **flaml** - ``flaml.AutoML`` with its default estimator list and search (Wang et al., MLSys
  2021), ``time_budget`` = the budget less the time to read and featurise the data, the task's
  metric (RMSE on the log target for RMSLE-type metrics), FLAML's own retraining on all rows.
* **autogluon_medium**, **autogluon_best** - AutoGluon's ``TabularPredictor`` (Erickson et al.,
  *AutoGluon-Tabular*, 2020) with the ``medium_quality`` or ``best_quality`` preset, on the raw
  shared columns (AutoGluon featurises them itself), the task's metric, ``time_limit`` = 90 % of
  the budget left after writing the tables (the rest is for its predictions), ``num_cpus`` = the
  threads. It runs in its own environment (:func:`autogluon_python`; ``make autogluon-env``
  makes one): autogluon.tabular pins an older pandas than the engine's.

Multi-target regression fits one model per target, each with an equal share of the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from mcgs.task import TaskSpec, load_task, read_table

__all__ = ["COMPETITORS", "plain_features", "submission_frame", "fit_competitor", "autogluon_python", "AUTOGLUON_PRESETS"]

#: AutoGluon's competitors and their presets.
AUTOGLUON_PRESETS = {"autogluon_medium": "medium_quality", "autogluon_best": "best_quality"}
COMPETITORS = ("lightgbm", "optuna", "flaml", *AUTOGLUON_PRESETS)
#: The variable naming the Python of AutoGluon's own environment.
AUTOGLUON_PYTHON_ENV = "MCGS_AUTOGLUON_PYTHON"
# AutoGluon's names for the task metrics (autogluon.core.metrics); RMSLE-type metrics are RMSE on log1p(y)
_AUTOGLUON_METRIC = {"roc_auc": "roc_auc", "log_loss": "log_loss", "accuracy": "accuracy", "rmse": "root_mean_squared_error",
                     "rmsle": "root_mean_squared_error", "mean_column_rmsle": "root_mean_squared_error", "mae": "mean_absolute_error",
                     "f1": "f1", "f1_macro": "f1_macro", "f1_micro": "f1_micro"}
_TEXT_MIN_WORDS = 5.0
_LOG_TARGET_METRICS = ("rmsle", "mean_column_rmsle")
# FLAML's names for the task metrics it knows (flaml/automl/ml.py, sklearn_metric_loss_score)
_FLAML_METRIC = {"roc_auc": "roc_auc", "log_loss": "log_loss", "accuracy": "accuracy", "rmse": "rmse", "rmsle": "rmse",
                 "mean_column_rmsle": "rmse", "mae": "mae", "f1": "f1", "f1_macro": "macro_f1", "f1_micro": "micro_f1"}


def _is_text(values: pd.Series) -> bool:
    s = values.dropna().astype(str)
    return len(s) > 0 and float(s.str.split().str.len().mean()) >= _TEXT_MIN_WORDS


def plain_features(spec: TaskSpec) -> tuple[Any, Any, dict[str, Any]]:
    """The competitors' common feature matrices of the task's train and test tables.

    Args:
        spec: The task (public files, id, targets).

    Returns:
        ``(X, X_test, info)``: a pandas frame pair (numbers and ``category`` columns) or, when a
        text column exists, a scipy CSR pair of float32; ``info`` names the numeric,
        categorical and text columns used.
    """
    train, test = read_table(spec.train_path), read_table(spec.test_path)
    drop = set(spec.target_columns) | ({spec.id_column} if spec.id_column else set())
    cols = [c for c in train.columns if c in test.columns and c not in drop]
    numeric, categorical, text = [], [], []
    for c in cols:
        both = pd.concat([train[c], test[c]], ignore_index=True)
        if pd.api.types.is_bool_dtype(both) or pd.api.types.is_numeric_dtype(both):
            numeric.append(c)
        elif _is_text(both):
            text.append(c)
        else:
            categorical.append(c)
    frames = []
    for table in (train, test):
        f = pd.DataFrame(index=range(len(table)))
        for c in numeric:
            f[c] = pd.to_numeric(table[c], errors="coerce").astype(float).to_numpy()
        for c in categorical:
            levels = pd.Categorical(pd.concat([train[c], test[c]]).dropna().astype(str)).categories
            f[c] = pd.Categorical(table[c].where(table[c].isna(), table[c].astype(str)), categories=levels)
        frames.append(f)
    info = {"numeric": numeric, "categorical": categorical, "text": text}
    if not text:
        return frames[0], frames[1], info
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    blocks = [[], []]
    for i, f in enumerate(frames):
        dense = f[numeric].to_numpy(dtype=float)
        codes = np.column_stack([f[c].cat.codes.to_numpy(dtype=float) for c in categorical]) if categorical else np.zeros((len(f), 0))
        codes[codes < 0] = np.nan
        blocks[i].append(sparse.csr_matrix(np.nan_to_num(np.hstack([dense, codes]), nan=-999.0)))
    for c in text:
        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=20000, sublinear_tf=True, dtype=np.float32)
        vec.fit(pd.concat([train[c], test[c]]).fillna("").astype(str))
        for i, table in enumerate((train, test)):
            blocks[i].append(vec.transform(table[c].fillna("").astype(str)))
    X, X_test = (sparse.hstack(b, format="csr", dtype=np.float32) for b in blocks)
    return X, X_test, info


def submission_frame(spec: TaskSpec, test: pd.DataFrame, test_pred: np.ndarray) -> pd.DataFrame:
    """Test predictions in the contract's layout (``spec.prediction_columns``: positive-class
    probability, class probabilities or values) turned into the sample submission's format.

    Args:
        spec: The task.
        test: The test table (for the id and echoed columns), n rows.
        test_pred: Shape (n, len(spec.prediction_columns)).

    Returns:
        A frame with ``spec.submission_columns``, in test order.
    """
    sub = pd.DataFrame(index=range(len(test)))
    for c in ([spec.id_column] if spec.id_column else []) + list(spec.echo_columns):
        sub[c] = test[c].to_numpy()
    label_cols = [c for c in spec.submission_columns if c != spec.id_column and c not in spec.echo_columns]
    if spec.task_kind == "binary":
        if spec.submission_format == "label":
            neg = next(c for c in spec.class_labels if str(c) != str(spec.positive_class))
            sub[label_cols[0]] = np.where(test_pred[:, 0] >= 0.5, str(spec.positive_class), str(neg))
        else:
            sub[label_cols[0]] = test_pred[:, 0]
    elif spec.task_kind == "multiclass":
        classes = [str(c) for c in spec.class_labels]
        if spec.submission_format == "label":
            sub[label_cols[0]] = np.asarray(classes)[test_pred.argmax(axis=1)]
        else:
            for i, c in enumerate(classes):
                sub[c] = test_pred[:, i]
    else:
        for j, t in enumerate(spec.target_columns):
            sub[t] = test_pred[:, j]
    return sub[spec.submission_columns]


# --- the three competitors --------------------------------------------------------------------


def _targets(spec: TaskSpec) -> list[tuple[str, np.ndarray]]:
    """(name, y) per model to fit: one for classification, one per target for regression."""
    train = read_table(spec.train_path)
    if spec.task_kind in ("binary", "multiclass"):
        return [(spec.target_columns[0], train[spec.target_columns[0]].astype(str).to_numpy())]
    if spec.task_kind not in ("regression", "multi_target_regression"):
        raise SystemExit(f"mcgs bench: the competitors handle binary, multiclass and regression tasks, not {spec.task_kind}")
    log = spec.metric in _LOG_TARGET_METRICS
    return [(t, np.log1p(np.clip(train[t].to_numpy(dtype=float), 0, None)) if log else train[t].to_numpy(dtype=float)) for t in spec.target_columns]


def _classes(spec: TaskSpec) -> list[str]:
    return [str(c) for c in spec.class_labels]


def _layout(spec: TaskSpec, model, X) -> np.ndarray:
    """A fitted model's predictions in contract layout (one column per prediction column of
    its target: positive-class probability, class probabilities, or the value)."""
    if spec.task_kind in ("binary", "multiclass"):
        proba = model.predict_proba(X)
        known = [str(c) for c in model.classes_]
        out = np.zeros((proba.shape[0], len(_classes(spec))))
        for i, c in enumerate(_classes(spec)):
            if c in known:
                out[:, i] = proba[:, known.index(c)]
        if spec.task_kind == "binary":
            return out[:, [_classes(spec).index(str(spec.positive_class))]]
        return out
    pred = np.asarray(model.predict(X), dtype=float)
    return (np.expm1(pred) if spec.metric in _LOG_TARGET_METRICS else pred)[:, None]


def _lgbm(spec: TaskSpec, params: dict[str, Any], seed: int, threads: int):
    import lightgbm as lgb

    cls = lgb.LGBMClassifier if spec.task_kind in ("binary", "multiclass") else lgb.LGBMRegressor
    return cls(random_state=seed, n_jobs=threads, verbose=-1, **params)


def _rows(X, idx: np.ndarray):
    return X.iloc[idx] if hasattr(X, "iloc") else X[idx]


def _cv_loss(spec: TaskSpec, y: np.ndarray, pred: np.ndarray) -> float:
    """The task metric as a loss (lower is better) on one target's CV predictions."""
    from sklearn import metrics

    if spec.task_kind in ("binary", "multiclass"):
        classes = _classes(spec)
        if spec.metric == "roc_auc":
            return -metrics.roc_auc_score(y == str(spec.positive_class), pred[:, 0])
        full = np.column_stack([1 - pred[:, 0], pred[:, 0]]) if spec.task_kind == "binary" else pred
        order = classes if spec.task_kind == "multiclass" else [c for c in classes if c != str(spec.positive_class)] + [str(spec.positive_class)]
        if spec.metric == "log_loss":
            return metrics.log_loss(y, np.clip(full, 1e-15, 1), labels=order)
        labels = np.asarray(order)[full.argmax(axis=1)]
        if spec.metric.startswith("f1"):
            average = {"f1": "binary", "f1_macro": "macro", "f1_micro": "micro"}[spec.metric]
            return -metrics.f1_score(y, labels, average=average, pos_label=str(spec.positive_class))
        return -metrics.accuracy_score(y, labels)
    if spec.metric == "mae":
        return metrics.mean_absolute_error(y, pred[:, 0])
    return float(np.sqrt(metrics.mean_squared_error(y, pred[:, 0])))  # RMSE, or RMSLE on log1p(y)


def _fit_lightgbm(spec, X, X_test, y, budget_s, seed, threads, log) -> tuple[np.ndarray, dict]:
    model = _lgbm(spec, {}, seed, threads).fit(X, y)
    return _layout(spec, model, X_test), {"params": "LightGBM defaults"}


def _fit_optuna(spec, X, X_test, y, budget_s, seed, threads, log) -> tuple[np.ndarray, dict]:
    import optuna
    from sklearn.model_selection import KFold, StratifiedKFold

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    classify = spec.task_kind in ("binary", "multiclass")
    splitter = (StratifiedKFold if classify else KFold)(n_splits=3, shuffle=True, random_state=seed)
    splits = list(splitter.split(np.zeros(len(y)), y if classify else None))
    def objective(trial: optuna.Trial) -> float:
        params = {
            "num_leaves": trial.suggest_int("num_leaves", 7, 255, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
            "n_estimators": trial.suggest_int("n_estimators", 100, 1000, log=True),
            "min_child_samples": trial.suggest_int("min_child_samples", 5, 100, log=True),
            "subsample": trial.suggest_float("subsample", 0.5, 1.0),
            "subsample_freq": 1,
            "colsample_bytree": trial.suggest_float("colsample_bytree", 0.5, 1.0),
            "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10.0, log=True),
        }
        width = len(_classes(spec)) if spec.task_kind == "multiclass" else 1
        oof = np.zeros((len(y), width))
        for fit_idx, val_idx in splits:
            model = _lgbm(spec, params, seed, threads).fit(_rows(X, fit_idx), y[fit_idx])
            oof[val_idx] = _layout(spec, model, _rows(X, val_idx))
        if not classify and spec.metric in _LOG_TARGET_METRICS:
            oof = np.log1p(np.clip(oof, 0, None))  # _layout undid the log: score on the log scale
        return _cv_loss(spec, y, oof)

    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.optimize(objective, timeout=max(1.0, 0.85 * budget_s), gc_after_trial=False)
    log(f"optuna: {len(study.trials)} trials, best CV loss {study.best_value:.6g}")
    model = _lgbm(spec, {**study.best_params, "subsample_freq": 1}, seed, threads).fit(X, y)
    return _layout(spec, model, X_test), {"trials": len(study.trials), "best_cv_loss": study.best_value, "params": study.best_params}


def _fit_flaml(spec, X, X_test, y, budget_s, seed, threads, log) -> tuple[np.ndarray, dict]:
    from flaml import AutoML

    if spec.metric not in _FLAML_METRIC:
        raise SystemExit(f"mcgs bench: no FLAML metric for {spec.metric!r}")
    automl = AutoML()
    classify = spec.task_kind in ("binary", "multiclass")
    # class indices, not strings: some of FLAML's learners (XGBoost) refuse string labels
    target = np.asarray([_classes(spec).index(v) for v in y]) if classify else y
    automl.fit(X, target, task="classification" if classify else "regression", metric=_FLAML_METRIC[spec.metric],
               time_budget=max(1.0, budget_s), n_jobs=threads, seed=seed, verbose=0)
    log(f"flaml: best {automl.best_estimator}, loss {automl.best_loss:.6g}")
    model = _Decoded(automl, [_classes(spec)[int(i)] for i in automl.classes_]) if classify else automl
    return _layout(spec, model, X_test), {"best_estimator": automl.best_estimator, "best_loss": automl.best_loss,
                                          "config": automl.best_config}


class _Decoded:
    """A classifier fitted on class indices, seen with its class names."""

    def __init__(self, model, classes: list[str]):
        self.model, self.classes_ = model, classes

    def predict_proba(self, X):
        return self.model.predict_proba(X)


_FITTERS: dict[str, Callable] = {"lightgbm": _fit_lightgbm, "optuna": _fit_optuna, "flaml": _fit_flaml}


def autogluon_python() -> Path:
    """The Python of AutoGluon's own environment: ``$MCGS_AUTOGLUON_PYTHON``, else
    ``.venv-autogluon/bin/python`` in the current folder or the repository (``make autogluon-env``).

    Raises:
        SystemExit: none of them is there, or it cannot import ``autogluon.tabular``; the
            message says how to make one.
    """
    given = os.environ.get(AUTOGLUON_PYTHON_ENV)
    repo = Path(__file__).resolve().parents[2]
    candidates = [Path(given)] if given else list(dict.fromkeys([Path.cwd() / ".venv-autogluon/bin/python", repo / ".venv-autogluon/bin/python"]))
    how = (f"AutoGluon runs in its own environment (it pins an older pandas than mcgs): make one with `make autogluon-env` in the "
           f"repository, or point {AUTOGLUON_PYTHON_ENV} at the python of an environment with autogluon.tabular")
    python = next((c for c in candidates if c.is_file()), None)
    if python is None:
        raise SystemExit(f"mcgs bench: no AutoGluon environment at {', '.join(str(c) for c in candidates)}. {how}")
    check = subprocess.run([str(python), "-c", "import autogluon.tabular"], capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"mcgs bench: {python} cannot import autogluon.tabular ({check.stderr.strip().splitlines()[-1:]}). {how}")
    return python


def _fit_autogluon(spec: TaskSpec, preset: str, out: Path, budget_s: float, threads: int, seed: int, log) -> tuple[np.ndarray, list[dict]]:
    """AutoGluon on the raw shared columns, one predictor per target, in its own Python
    (:mod:`mcgs.mlebench.autogluon_runner`). Returns the test predictions in contract layout and
    one record per target."""
    start = time.monotonic()
    if spec.metric not in _AUTOGLUON_METRIC:
        raise SystemExit(f"mcgs bench: no AutoGluon metric for {spec.metric!r}")
    python = autogluon_python()
    train, test = read_table(spec.train_path), read_table(spec.test_path)
    drop = set(spec.target_columns) | ({spec.id_column} if spec.id_column else set())
    cols = [c for c in train.columns if c in test.columns and c not in drop]
    work = out / "autogluon"
    work.mkdir(parents=True, exist_ok=True)
    test[cols].to_csv(work / "test.csv", index=False)
    classify = spec.task_kind in ("binary", "multiclass")
    targets = _targets(spec)
    preds, records = [], []
    for i, (t, y) in enumerate(targets):
        frame = train[cols].copy()
        frame["__label__"] = y
        frame.to_csv(work / "train.csv", index=False)
        left = budget_s - (time.monotonic() - start)
        limit = max(10.0, 0.9 * left / (len(targets) - i) - 5.0)
        cmd = [str(python), str(Path(__file__).with_name("autogluon_runner.py")), "--train", str(work / "train.csv"),
               "--test", str(work / "test.csv"), "--label", "__label__", "--problem-type", spec.task_kind if classify else "regression",
               "--metric", _AUTOGLUON_METRIC[spec.metric], "--presets", preset, "--out", str(work / "pred.csv"),
               "--info", str(work / "info.json"), "--path", str(work / f"models_{i}"), "--time-limit", f"{limit:.0f}",
               "--cpus", str(threads), "--seed", str(seed)]
        log(f"autogluon ({preset}): target {t}, time_limit {limit:.0f}s")
        done = subprocess.run(cmd, stdout=sys.stdout, stderr=sys.stderr)
        if done.returncode != 0:
            raise SystemExit(f"mcgs bench: AutoGluon failed on target {t} (exit {done.returncode}); its output is in stderr.txt")
        pred = pd.read_csv(work / "pred.csv")
        if classify:
            pred.columns = [str(c) for c in pred.columns]
            layout = np.column_stack([pred[c].to_numpy(float) if c in pred.columns else np.zeros(len(pred)) for c in _classes(spec)])
            if spec.task_kind == "binary":
                layout = layout[:, [_classes(spec).index(str(spec.positive_class))]]
        else:
            values = pred["prediction"].to_numpy(float)
            layout = (np.expm1(values) if spec.metric in _LOG_TARGET_METRICS else values)[:, None]
        preds.append(layout)
        records.append({"target": t, "time_limit_s": round(limit), **json.loads((work / "info.json").read_text())})
    return np.hstack(preds), records


def fit_competitor(name: str, task_dir: Path, out: Path, budget_s: float, threads: int, seed: int, log: Callable[[str], None] = print) -> dict:
    """Fit competitor ``name`` on the task and write ``out/submission.csv`` and ``out/result.json``.

    Args:
        name: One of :data:`COMPETITORS`.
        task_dir: An mcgs task folder (e.g. a prepared MLE-bench competition's).
        out: Output folder (created).
        budget_s: Wall budget of the whole fit, seconds, counted from the call (reading and
            featurising the data included).
        threads: Threads the models may use.
        seed: Random seed.

    Returns:
        The result record written to ``result.json``.

    Raises:
        SystemExit: an unknown competitor or a task kind the competitors do not handle.
    """
    start = time.monotonic()
    if name not in _FITTERS and name not in AUTOGLUON_PRESETS:
        raise SystemExit(f"mcgs bench: unknown competitor {name!r}; choose from {', '.join(COMPETITORS)}")
    spec = load_task(task_dir)
    out.mkdir(parents=True, exist_ok=True)
    if name in AUTOGLUON_PRESETS:  # its own featurisation, in its own environment
        info, ready_s = {"featurisation": "autogluon's own"}, 0.0
        test_pred, details = _fit_autogluon(spec, AUTOGLUON_PRESETS[name], out, budget_s, threads, seed, log)
    else:
        X, X_test, info = plain_features(spec)
        ready_s = time.monotonic() - start
        preds, details = [], []
        targets = _targets(spec)
        for t, y in targets:
            share = (budget_s - (time.monotonic() - start)) / (len(targets) - len(preds))
            pred, detail = _FITTERS[name](spec, X, X_test, y, share, seed, threads, log)
            preds.append(pred)
            details.append({"target": t, **detail})
        test_pred = np.hstack(preds)
    submission_frame(spec, read_table(spec.test_path), test_pred).to_csv(out / "submission.csv", index=False)
    record = {"competitor": name, "features": info, "featurise_s": round(ready_s, 2), "fit_s": round(time.monotonic() - start, 2),
              "details": details}
    (out / "result.json").write_text(json.dumps(record, indent=2, default=str))
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mcgs.mlebench.competitors", description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=COMPETITORS)
    ap.add_argument("--task", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, required=True, help="wall budget, seconds")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    fit_competitor(a.name, a.task, a.out, a.budget, a.threads, a.seed, log=lambda m: print(m, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
