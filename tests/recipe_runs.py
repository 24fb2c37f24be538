"""Test helpers: small realistic tasks, and running a recipe config as the engine would
(outside the search)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from mcgs.coders.recipe import render_program
from mcgs.contract import prepare_run_input, prepare_workspace
from mcgs.evaluation import Evaluation, TaskLabels, evaluate_workspace
from mcgs.profile import profile_task
from mcgs.task import TaskSpec, load_task


def run_recipe(spec: TaskSpec, config: dict[str, Any], folder: Path, env: dict[str, str] | None = None) -> tuple[Evaluation, str, tuple[str, ...]]:
    """Render ``config`` for ``spec``, run it in a fresh workspace under ``folder`` (with ``env``
    as its whole environment when given) and score it.

    Returns:
        ``(evaluation, stdout, knowledge_ids)``; fails the test when the program exits non-zero.
    """
    prof = profile_task(spec)
    code, ids = render_program({"seed": 0} | config, title="test", plan="test", profile=prof)
    compile(code, "solution.py", "exec")
    run = folder / "run"
    run.mkdir(parents=True, exist_ok=True)
    inp = prepare_run_input(spec, run)
    ws = prepare_workspace(inp, folder / "ws", code)
    r = subprocess.run([sys.executable, "solution.py"], cwd=ws, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    if spec.forecast is not None:  # scored on the validation windows of the engine's own copy of the series
        from mcgs.forecast import ForecastLabels

        return evaluate_workspace(ForecastLabels(spec, np.load(run / "private" / "series.npy")), ws), r.stdout, ids
    return evaluate_workspace(TaskLabels.load(spec, inp / "folds.csv"), ws), r.stdout, ids


def mixed_table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """Spaceship-like columns with meaningless names: compound ids, booleans with gaps,
    categoricals, skewed amounts, missing values."""
    group = rng.integers(0, n // 2, n)
    df = pd.DataFrame(
        {
            "key": [f"{g:04d}_{i:04d}" for i, g in enumerate(group)],
            "flag": rng.choice(["True", "False", None], n, p=[0.45, 0.45, 0.1]),
            "code": [f"{'ABC'[k % 3]}/{k}/{'PS'[k % 2]}" for k in rng.integers(0, 300, n)],
            "kind": rng.choice(["x", "y", "z"], n),
            "amount_a": np.where(rng.random(n) < 0.6, 0.0, rng.exponential(500, n)),
            "amount_b": np.where(rng.random(n) < 0.6, 0.0, rng.exponential(800, n)),
            "level": rng.normal(30, 10, n).round(),
        }
    )
    df.loc[rng.random(n) < 0.05, "level"] = np.nan
    return df


def make_task(folder, kind: str, n: int = 240, metric: str | None = None):
    rng = np.random.default_rng(0)
    df = mixed_table(n + 60, rng)
    signal = (df["amount_a"] > 0).astype(float) + (df["kind"] == "x") + rng.normal(0, 0.5, len(df))
    if kind == "binary":
        df["target"] = np.where(signal > 1.0, True, False)
        targets, metric = ["target"], metric or "accuracy"
    elif kind == "multiclass":
        df["target"] = np.select([signal < 0.6, signal < 1.4], ["low", "mid"], "high")
        targets, metric = ["target"], metric or "log_loss"
    elif kind == "multilabel":
        df["l1"] = (signal > 1.0).astype(int)
        df["l2"] = ((df["amount_b"] > 0) ^ (rng.random(len(df)) < 0.2)).astype(int)
        targets, metric = ["l1", "l2"], metric or "mean_column_roc_auc"
    elif kind == "regression":
        df["target"] = 10 + 5 * signal
        targets, metric = ["target"], metric or "rmse"
    else:
        df["t1"] = np.exp(signal)
        df["t2"] = 3 + signal**2
        targets, metric = ["t1", "t2"], metric or "rmsle"
    folder.mkdir(parents=True)
    train, test = df.iloc[:n], df.iloc[n:].drop(columns=targets)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sample = pd.DataFrame({"key": test["key"]})
    if kind == "multiclass" and metric in ("log_loss", "roc_auc"):  # probabilities: one column per class
        for c in ("high", "low", "mid"):
            sample[c] = 1 / 3
    else:
        for t in targets:
            sample[t] = train[t].iloc[0]
    sample.to_csv(folder / "sample_submission.csv", index=False)
    spec = {"metric": metric, "validation": {"n_splits": 3}}
    if kind == "multiclass":
        spec["target"] = "target"
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return load_task(folder)
