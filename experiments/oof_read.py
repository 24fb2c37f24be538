"""What the engine spends on a node's predictions as the data grows: reading, checking and
scoring a candidate's ``oof.csv``, ``test_pred.csv`` and ``submission.csv``
(:func:`mcgs.evaluation.evaluate_workspace`, what the engine does for every finished node), and
selecting an ensemble over several nodes' OOF predictions (:func:`mcgs.ensemble.select_ensemble`,
what every Ensemble node and the final choice do), on a suite task of 1.4 M rows (issue 33: "the
engine reads 1 M-row OOF files without slowing the search").

The task is the suite's ``military_branch`` (built by ``experiments/suite.py``), cut to its first
n training rows for each size measured; every training row is validated (the worst case: a
5-fold scheme; the task's own scheme from 200 000 rows is a holdout of a fifth, a fifth of this
work). The candidates' files are written here as a candidate writes them (pandas ``to_csv``:
a ``row`` column and one probability per class, noisy around the labels so that ensembles have
something to choose), and the time a candidate spends writing them is reported beside the
engine's time to read them, measured in the same run. Times are the median of ``--repeats``.

Usage (from the repository root, after ``make install`` and building the suite)::

    .venv/bin/python experiments/oof_read.py --suite /tmp/suite --work /tmp/oof-read \\
        --report docs/results/oof_read.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _candidate_files(spec, workspace: Path, y: np.ndarray, n_test: int, test_ids: pd.Series, rng: np.random.Generator, quality: float) -> float:
    """Write a candidate's three output files; return the seconds the writing took."""
    from mcgs.contract import OOF_PATH, SUBMISSION_PATH, TEST_PRED_PATH

    labels = [str(c) for c in spec.class_labels]
    cols = spec.prediction_columns
    onehot = (np.asarray([str(v) for v in y])[:, None] == np.asarray(labels)[None, :]).astype(float)
    logits = quality * onehot + rng.normal(size=onehot.shape)
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    test = rng.dirichlet(np.ones(len(labels)), size=n_test)
    start = time.perf_counter()
    (workspace / OOF_PATH).parent.mkdir(parents=True, exist_ok=True)
    (workspace / SUBMISSION_PATH).parent.mkdir(parents=True, exist_ok=True)
    oof = pd.DataFrame(proba, columns=cols)
    oof.insert(0, "row", np.arange(len(y)))
    oof.to_csv(workspace / OOF_PATH, index=False)
    pred = pd.DataFrame(test, columns=cols)
    pred.insert(0, "row", np.arange(n_test))
    pred.to_csv(workspace / TEST_PRED_PATH, index=False)
    sub = pd.DataFrame(test, columns=[c for c in spec.submission_columns if c != spec.id_column])
    sub.insert(0, spec.id_column, test_ids.to_numpy())
    sub.to_csv(workspace / SUBMISSION_PATH, index=False)
    return time.perf_counter() - start


def measure(suite: Path, work: Path, sizes: list[int], members: int, repeats: int) -> list[dict]:
    """One row per size: seconds to write (candidate) and to evaluate (engine) one node's files,
    and to select an ensemble over ``members`` nodes."""
    from mcgs.contract import OOF_PATH
    from mcgs.ensemble import select_ensemble
    from mcgs.evaluation import TaskLabels, evaluate_workspace, read_predictions, score_predictions
    from mcgs.task import load_task, read_table

    full = load_task(suite / "tasks" / "military_branch")
    train = read_table(full.train_path)
    sample = pd.read_csv(full.sample_submission_path, dtype=str, keep_default_na=False)
    test_ids = pd.read_csv(full.test_path, usecols=[full.id_column], dtype=str, keep_default_na=False)[full.id_column]
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        if n > len(train):
            raise SystemExit(f"--sizes: {n} is more than military_branch's {len(train)} training rows")
        spec = full.model_copy(update={"n_train": n})
        y = train[spec.target_columns[0]].to_numpy()[:n]
        labels = TaskLabels(spec=spec, y=y, folds=np.arange(n) % 5, sample=sample)
        folder = work / f"n{n}"
        shutil.rmtree(folder, ignore_errors=True)
        writes, oofs = [], {}
        for m in range(members):
            writes.append(_candidate_files(spec, folder / f"node{m}", y, spec.n_test, test_ids, rng, quality=0.3 + 0.1 * m))
        evaluate = _median_time(lambda: evaluate_workspace(labels, folder / "node0"), repeats)
        oof_only = _median_time(lambda: score_predictions(spec, y, read_predictions(spec, folder / "node0", OOF_PATH, np.arange(n))), repeats)
        for m in range(members):
            oofs[m] = evaluate_workspace(labels, folder / f"node{m}").oof
        select = _median_time(lambda: select_ensemble(spec, y, oofs), max(1, repeats // 2))
        size_mb = sum(p.stat().st_size for p in (folder / "node0").rglob("*") if p.is_file()) / 2**20
        rows.append({"rows": n, "files_mb": round(size_mb, 1), "write_s": round(statistics.median(writes), 2),
                     "evaluate_s": round(evaluate, 2), "oof_s": round(oof_only, 3), "select_s": round(select, 2), "members": members})
        shutil.rmtree(folder, ignore_errors=True)
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, required=True, help="The suite built by experiments/suite.py.")
    parser.add_argument("--work", type=Path, required=True, help="A scratch folder for the candidates' files.")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="Training rows, comma-separated.")
    parser.add_argument("--members", type=int, default=8, help="Nodes an ensemble is selected over.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    if not (args.suite / "tasks" / "military_branch").is_dir():
        print(f"--suite {args.suite}: no tasks/military_branch; build it with: python experiments/suite.py --out {args.suite}", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    start = time.perf_counter()
    rows = measure(args.suite, args.work, sizes, args.members, args.repeats)
    small, large = rows[0], rows[-1]
    per_row = (large["oof_s"] / large["rows"]) / (small["oof_s"] / small["rows"])
    lines = ["| training rows (all validated) | one node's files (MiB) | candidate writes them (s) | engine reads, checks and scores them (s) | engine / candidate "
             f"| of which oof.csv (s) | ensemble selection over {args.members} nodes (s) |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['rows']:,} | {r['files_mb']} | {r['write_s']} | {r['evaluate_s']} | {r['evaluate_s'] / r['write_s']:.2f} | {r['oof_s']} | {r['select_s']} |")
    page = "\n".join([
        f"# Reading a node's predictions as the data grows ({dt.datetime.now().isoformat(timespec='seconds')})", "",
        f"Machine: {platform.machine()}, 2 cores. Python {platform.python_version()}. Wall time {time.perf_counter() - start:.0f} s.",
        f"Command: `.venv/bin/python experiments/oof_read.py --suite SUITE --work WORK --sizes {args.sizes} --members {args.members} "
        f"--repeats {args.repeats}{' --report ' + str(args.report) if args.report else ''}`", "",
        "Task: the suite's military_branch (4 classes, log loss), cut to its first n training rows; its test set "
        "(282 919 rows) is the same at every size. Every training row is validated (5 folds), the worst case.", "",
        *lines, "",
        f"Time to read and score oof.csv per training row at {large['rows']:,} rows against {small['rows']:,}: x{per_row:.2f} (1 = linear in the rows).",
    ]) + "\n"
    print(page)
    if args.report:
        args.report.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
