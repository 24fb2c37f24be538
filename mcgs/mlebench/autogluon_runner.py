"""Fit AutoGluon's TabularPredictor and write its test predictions: run by AutoGluon's own Python.

This file imports nothing from mcgs: ``mcgs bench`` runs it with the interpreter of a separate
environment that has ``autogluon.tabular`` (which pins an older pandas than the engine's; the
engine's packages are never touched). The engine side (:func:`mcgs.mlebench.competitors.fit_autogluon`)
writes the tables and reads the predictions back.

Input: ``--train`` and ``--test`` CSV tables (train holds the label column ``--label``; CSV, since the
two environments have different pandas versions),
the problem type, AutoGluon's metric name, the preset, the time limit in seconds and the CPU
count. Output: ``--out`` a CSV of test predictions, one column per class (probabilities, columns
named by class) or one column ``prediction``; and ``--info`` a JSON record of the leaderboard's
best model and the models fitted.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--train", "--test", "--label", "--problem-type", "--metric", "--presets", "--out", "--info", "--path"):
        ap.add_argument(name, required=True)
    ap.add_argument("--time-limit", type=float, required=True)
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)

    import numpy as np
    import pandas as pd
    from autogluon.tabular import TabularPredictor

    np.random.seed(a.seed)
    train, test = pd.read_csv(a.train), pd.read_csv(a.test)
    predictor = TabularPredictor(label=a.label, problem_type=a.problem_type, eval_metric=a.metric, path=a.path, verbosity=1)
    predictor.fit(train, presets=a.presets, time_limit=a.time_limit, num_cpus=a.cpus, num_gpus=0)
    if a.problem_type in ("binary", "multiclass"):
        pred = predictor.predict_proba(test, as_multiclass=True)
        pred.columns = [str(c) for c in pred.columns]
    else:
        pred = predictor.predict(test).to_frame("prediction")
    pred.to_csv(a.out, index=False)
    board = predictor.leaderboard(silent=True)
    with open(a.info, "w") as fh:
        json.dump({"best_model": predictor.model_best, "models": len(board), "presets": a.presets,
                   "best_val_score": float(board["score_val"].iloc[0]) if len(board) else None}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
