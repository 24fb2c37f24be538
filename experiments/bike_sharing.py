"""bike-sharing-demand (time-indexed regression): mcgs from a plain-words request against a
LightGBM baseline, both scored by RMSLE on the derived test labels.

* **Baseline** (:func:`baseline`): LightGBM with default parameters on the raw columns plus the
  calendar parts of ``datetime`` (year, month, day, day of week, hour), fit on all of
  ``raw/train.csv``, predicting ``count`` for ``raw/test.csv`` (negative predictions clipped
  to 0).
* **mcgs**: ``mcgs run --prompt "Forecast the hourly rental count; judged by RMSLE."
  --data raw/`` per seed, offline recipe coder; the request parser picks the target, the
  metric, the datetime id and a time-ordered validation split.

Both submissions are scored against ``derived/test_labels.csv`` (see the task's SOURCE.md:
test hours joined to the UCI source data). The test labels are read only here, never by the
engine or a candidate.

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/bike_sharing.py --shared ../shared/data --work /tmp/mcgs-bikes \
        --seeds 0 1 2 --time-budget 10m --report docs/results/bike_sharing.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlebench_runs import _commit, finished  # noqa: E402
from spaceship_titanic import best_cv, mcgs, node_count  # noqa: E402

PROMPT = "Forecast the hourly rental count; judged by RMSLE."


def rmsle(y_true, y_pred) -> float:
    """Root mean squared log error (Kaggle's metric for this competition)."""
    from sklearn.metrics import mean_squared_log_error

    return float(np.sqrt(mean_squared_log_error(y_true, np.clip(y_pred, 0, None))))


def calendar(frame: pd.DataFrame) -> pd.DataFrame:
    t = pd.to_datetime(frame["datetime"])
    out = frame.drop(columns=["datetime"]).copy()
    out["year"], out["month"], out["day"], out["dayofweek"], out["hour"] = t.dt.year, t.dt.month, t.dt.day, t.dt.day_of_week, t.dt.hour
    return out


def baseline(raw: Path, labels: pd.DataFrame) -> float:
    """RMSLE of LightGBM (defaults) on the raw columns + calendar parts."""
    import lightgbm as lgb

    train, test = pd.read_csv(raw / "train.csv"), pd.read_csv(raw / "test.csv")
    X = calendar(train[test.columns])
    model = lgb.LGBMRegressor(random_state=0, verbose=-1, n_jobs=2).fit(X, train["count"])
    pred = model.predict(calendar(test))
    return rmsle(labels.set_index("datetime").loc[test["datetime"], "count"].to_numpy(), pred)


def score_submission(path: Path, labels: pd.DataFrame) -> float:
    sub = pd.read_csv(path)
    truth = labels.set_index("datetime").loc[sub["datetime"], "count"].to_numpy()
    return rmsle(truth, sub["count"].to_numpy())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-budget", default="10m")
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()
    task = args.shared / "bike-sharing-demand"
    raw = task / "raw"
    labels = pd.read_csv(task / "derived" / "test_labels.csv")
    base = baseline(raw, labels)
    print(f"baseline LightGBM (defaults, raw + calendar parts): RMSLE {base:.5f}", flush=True)
    rows = []
    for seed in args.seeds:
        run = args.work / f"seed{seed}"
        if not finished(run):
            if run.exists():
                mcgs("resume", str(run))
            else:
                mcgs("run", "--prompt", PROMPT, "--data", str(raw), "--out", str(run), "--time-budget", args.time_budget, "--seed", str(seed))
        total, valid = node_count(run)
        score = score_submission(run / "best" / "submission.csv", labels)
        rows.append({"seed": seed, "nodes": total, "valid": valid, "cv": best_cv(run), "test_rmsle": score})
        print(json.dumps(rows[-1]), flush=True)
    med = statistics.median(r["test_rmsle"] for r in rows)
    print(f"median test RMSLE over seeds {med:.5f} vs baseline {base:.5f}: {'better' if med < base else 'NOT better'}")
    if args.report:
        lines = [
            f"# bike-sharing-demand ({dt.datetime.now().isoformat(timespec='seconds')})",
            "",
            f"Machine: {platform.machine()}, 2 cores. Commit {_commit()}. Budget per run: {args.time_budget}. "
            f"Request: `{PROMPT}` on `raw/` (offline recipe coder). Scored by RMSLE on `derived/test_labels.csv` (lower is better).",
            "",
            f"Baseline (LightGBM defaults on the raw columns + calendar parts of `datetime`): **{base:.5f}**",
            "",
            "| seed | nodes (valid) | CV RMSLE (time-ordered folds) | test RMSLE |",
            "|---|---|---|---|",
            *[f"| {r['seed']} | {r['nodes']} ({r['valid']}) | {r['cv']:.5f} | {r['test_rmsle']:.5f} |" for r in rows],
            "",
            f"Median test RMSLE **{med:.5f}** vs baseline {base:.5f} ({'better' if med < base else 'not better'}).",
            "",
        ]
        args.report.write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
