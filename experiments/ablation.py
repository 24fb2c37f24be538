"""Ablation: the MCGS policy against a tree-only UCT policy and AIDE's greedy policy.

Same recipe coder, same wall budget, same final ensemble; only ``--policy`` differs. Tasks:
spaceship-titanic, nomad2018-predict-transparent-conductors and leaf-classification on their
MLE-bench splits (graded on the private answers by ``mcgs.mlebench.grade_submission``), and
house-prices-advanced-regression-techniques on a fixed 10 % holdout of its train.csv
(``train_test_split(test_size=0.1, random_state=0)``; RMSE of log prices, the Kaggle metric).

For every run it grades three submissions: the run's final one (``best/submission.csv``: the
final ensemble, or the best single node when the ensemble's cross-fitted score does not beat
it), that of the best single node by CV, and that of the final ensemble node itself (built in
the budget's reserved slice unless greedy selection kept one node). The report gives

* the normalised score per task, ``(score - worst) / (best - worst)`` over all runs of that task
  (direction-aware, 1 = best), averaged over seeds, and the mean over tasks per policy;
* tasks won per policy (highest mean normalised score on the task);
* per task, the median over seeds (mcgs policy) of the final submission's and of the final
  ensemble node's held-out score against the best single node's, and per run the ensemble's
  advantage with a paired bootstrap interval over the held-out rows (:func:`heldout_difference`);
* per task, over all seeds at once, the final ensemble against the best single node and MCGS's
  final submission against each other policy's, as a mean held-out advantage with a two-way
  bootstrap interval over held-out rows and seeds (:func:`pooled_heldout_difference`).

Resumable: a run whose storage says ``finished`` is not run again, only graded.
``--parallel-runs 2`` runs two searches at once with one core each (the same conditions for
every policy, half the wall time).

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/ablation.py --shared ../shared/data --work /tmp/mcgs-ablation \
        --time-budget 5m --seeds 0 1 2 --report docs/results/ablation.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import yaml

from mcgs.metrics import get_metric
from mcgs.mlebench import grade_submission, prepare_competition
from mcgs.search import open_search
from mcgs.settings import parse_duration
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)

MLEBENCH_TASKS = ("spaceship-titanic", "nomad2018-predict-transparent-conductors", "leaf-classification")
HOUSE = "house-prices-advanced-regression-techniques"
POLICIES = ("mcgs", "tree", "greedy")


def prepare_house_prices(raw: Path, out: Path) -> Path:
    """A plain mcgs task folder from house-prices' train.csv with a fixed 10 % holdout.

    Writes ``out/task`` (train.csv, test.csv without SalePrice, sample_submission.csv,
    task.yaml) and ``out/holdout_answers.csv`` (Id, SalePrice) outside the task folder.
    """
    from sklearn.model_selection import train_test_split

    task = out / "task"
    if (task / "task.yaml").is_file():
        return task
    df = pd.read_csv(raw / "train.csv")
    train, test = train_test_split(df, test_size=0.1, random_state=0)
    task.mkdir(parents=True, exist_ok=True)
    train.to_csv(task / "train.csv", index=False)
    test.drop(columns=["SalePrice"]).to_csv(task / "test.csv", index=False)
    pd.DataFrame({"Id": test["Id"], "SalePrice": float(train["SalePrice"].median())}).to_csv(task / "sample_submission.csv", index=False)
    description = (raw / "overview.txt").read_text() if (raw / "overview.txt").is_file() else "Predict SalePrice."
    (task / "task.yaml").write_text(yaml.safe_dump({"name": HOUSE, "target": "SalePrice", "id_column": "Id", "metric": "rmsle", "description": description}))
    test[["Id", "SalePrice"]].to_csv(out / "holdout_answers.csv", index=False)
    return task


def prepare_task(task_id: str, shared: Path, data: Path) -> Path:
    """The task folder of ``task_id`` under ``data``, prepared from ``shared/<task_id>/raw`` once:
    an MLE-bench split, or the house-prices holdout (:func:`prepare_house_prices`)."""
    if task_id == HOUSE:
        return prepare_house_prices(shared / HOUSE / "raw", data / HOUSE)
    if not (data / task_id / "config.yaml").is_file():
        prepare_competition(task_id, shared / task_id / "raw", data)
    return data / task_id


def grade(task_id: str, submission: Path, data: Path) -> float | None:
    """Held-out score of a submission, or None when it is missing or invalid."""
    if not submission.is_file():
        return None
    if task_id == HOUSE:
        answers, id_col, score = _heldout_frames(HOUSE, data)
        sub = pd.read_csv(submission)
        pred = answers[[id_col]].merge(sub, on=id_col, how="left")["SalePrice"]
        if pred.isna().any() or (pred <= 0).any():
            return None
        return round(score(sub, answers), 5)
    report = grade_submission(task_id, submission, data)
    return report.score if report.valid_submission else None


def _heldout_frames(task_id: str, data: Path):
    """(answers, id column, score function(submission, answers)) of a task's held-out split."""
    if task_id == HOUSE:
        metric = get_metric("rmsle")

        def score(sub: pd.DataFrame, ans: pd.DataFrame) -> float:
            merged = ans.merge(sub, on="Id", suffixes=("", "_pred"), how="left")
            return metric.score(merged["SalePrice"], merged["SalePrice_pred"])

        return pd.read_csv(data / HOUSE / "holdout_answers.csv"), "Id", score
    from mcgs.mlebench.grade import load_competition_config
    from mcgs.mlebench.registry import get_competition

    spec = get_competition(task_id)
    config = load_competition_config(data / task_id, task_id)
    answers = pd.read_csv(data / task_id / config["dataset"]["answers"])
    return answers, spec.match_column or spec.id_column, lambda sub, ans: float(spec.load_grade_fn()(sub, ans, spec))


def heldout_difference(task_id: str, sub_a: Path, sub_b: Path, data: Path, lower_is_better: bool,
                       n_boot: int = 1000, seed: int = 0, weighted: bool = True) -> dict | None:
    """How much better submission A is than B on the held-out rows, with a paired bootstrap.

    The held-out rows are resampled with replacement (the same rows for A and B) ``n_boot``
    times, and both are scored on each resample with the task's metric (Efron & Tibshirani,
    *An Introduction to the Bootstrap*, 1993, ch. 13, percentile interval). One pair of
    :func:`pooled_heldout_difference`, which says how a resample is scored (``weighted``).

    Returns:
        ``{"gain": A's advantage on the full split (positive = A better, metric units),
        "lo": 2.5th and "hi": 97.5th percentile of the resampled advantages,
        "p_better": share of resamples where A is better}``, or None when either submission
        is missing or does not cover the held-out ids.
    """
    out = pooled_heldout_difference(task_id, [(sub_a, sub_b)], data, lower_is_better, n_boot=n_boot, seed=seed, weighted=weighted)
    return None if out is None else {k: out[k] for k in ("gain", "lo", "hi", "p_better")}


def _weighted_score(task_id: str):
    """``bind(answers, submission) -> (weights -> score)``: the task's held-out metric with row
    weights, or None for a grader it does not know.

    ``answers`` and ``submission`` are the held-out frames with the same rows in the same order;
    ``bind`` takes their arrays once, and the function it returns scores them with a weight per
    row (shape (n_rows,)). Every metric here is a function of a mean over rows (accuracy,
    multi-class log loss, and the squared log errors under RMSLE's root), so weights equal to
    each row's count in a bootstrap draw give the score of the drawn rows exactly, by
    scikit-learn's ``sample_weight``, without building resampled frames. The same scikit-learn
    functions as the graders (``mcgs.mlebench.grade``; house-prices: ``mcgs.metrics`` rmsle).
    """
    from sklearn.metrics import accuracy_score, log_loss, root_mean_squared_log_error

    def rmsle(cols, clip):
        def bind(ans, sub):
            pairs = [(ans[c].to_numpy(float), np.clip(sub[c].to_numpy(float), 0, None) if clip else sub[c].to_numpy(float)) for c in cols]
            return lambda w: float(np.mean([root_mean_squared_log_error(t, p, sample_weight=w) for t, p in pairs]))
        return bind

    if task_id == HOUSE:
        return rmsle(["SalePrice"], clip=True)
    from mcgs.mlebench.registry import get_competition

    spec = get_competition(task_id)
    grader = spec.grade_fn.rsplit(":", 1)[-1]
    if grader == "grade_mean_column_rmsle":
        return rmsle(list(spec.targets), clip=False)
    if grader == "grade_accuracy":
        (col,) = spec.targets

        def bind(ans, sub):
            t, p = ans[col].to_numpy(), sub[col].to_numpy()
            return lambda w: float(accuracy_score(t, p, sample_weight=w))
        return bind
    if grader == "grade_one_hot_log_loss":
        cols = list(spec.classes)

        def bind(ans, sub):
            t, p = ans[cols].to_numpy(float), sub[cols].to_numpy(float)
            return lambda w: float(log_loss(t, p, sample_weight=w))
        return bind
    return None


def pooled_heldout_difference(task_id: str, pairs: list[tuple[Path, Path]], data: Path, lower_is_better: bool,
                              n_boot: int = 1000, seed: int = 0, weighted: bool = True) -> dict | None:
    """Mean advantage of A over B across several pairs of submissions (one pair per seed), with a
    bootstrap over both sources of noise.

    Every seed's submissions are graded on the same held-out rows, so the rows' sampling noise
    is shared by all seeds and does not average out as seeds are added. Each resample therefore
    draws one set of held-out rows with replacement (the same for every submission) and, with
    one pair only, that is :func:`heldout_difference`'s paired bootstrap; with several pairs it
    also draws the pairs with replacement (the seeds' search randomness), and the statistic is
    the mean advantage over the drawn pairs on the drawn rows (a two-way bootstrap, Davison &
    Hinkley, *Bootstrap Methods and their Application*, 1997, §3.8). Pairs whose submissions
    are missing or do not cover the held-out ids are left out.

    Args:
        weighted: score each resample as the full split with each row weighted by its count in
            the draw (:func:`_weighted_score`; the same numbers, seconds instead of the graders'
            ten minutes for leaf-classification). A submission whose weighted full-split score
            differs from its grader's by more than 1e-9, and every submission of a task without
            a weighted metric, is regraded on each resample instead, as with ``weighted=False``
            (the grader on resampled rows whose ids are renumbered so repeats stay distinct).

    Returns:
        ``{"gain": mean advantage of A on the full split (positive = A better, metric units),
        "lo", "hi": 2.5th and 97.5th percentiles of the resampled means, "p_better": share of
        resamples where A is better, "pairs": pairs used}``, or None when no pair is usable.
    """
    answers, id_col, score = _heldout_frames(task_id, data)
    bind = _weighted_score(task_id) if weighted else None
    ones = np.ones(len(answers))
    usable = []  # per pair: [(submission in answer order, full-split score, weighted scorer or None), x2]
    for sub_a, sub_b in pairs:
        if not (Path(sub_a).is_file() and Path(sub_b).is_file()):
            continue
        subs = []
        for path in (sub_a, sub_b):
            sub = pd.read_csv(path)
            sub = answers[[id_col]].merge(sub, on=id_col, how="left")  # answer order, one row each
            if len(sub) == len(answers) and not sub.isna().any().any():
                full = score(sub, answers)
                fast = bind(answers, sub) if bind is not None else None
                if fast is not None and abs(fast(ones) - full) > 1e-9:
                    print(f"  {path}: weighted score {fast(ones)} is not its grader's {full}; regraded on every resample (slow)", flush=True)
                    fast = None
                subs.append((sub, full, fast))
        if len(subs) == 2:
            usable.append(subs)
    if not usable:
        return None
    sign = -1.0 if lower_is_better else 1.0
    full = [sign * (a[1] - b[1]) for a, b in usable]
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(answers), len(answers))
        drawn = rng.integers(0, len(usable), len(usable)) if len(usable) > 1 else [0]
        counts = np.bincount(idx, minlength=len(answers)).astype(float)
        ans = None
        cache: dict[int, float] = {}
        for j in set(int(d) for d in drawn):
            pair = []
            for sub, _, fast in usable[j]:
                if fast is not None:
                    pair.append(fast(counts))
                    continue
                if ans is None:
                    ans = answers.iloc[idx].reset_index(drop=True)
                    ans[id_col] = np.arange(len(ans))
                s = sub.iloc[idx].reset_index(drop=True)
                s[id_col] = np.arange(len(s))
                pair.append(score(s, ans))
            cache[j] = sign * (pair[0] - pair[1])
        means.append(float(np.mean([cache[int(d)] for d in drawn])))
    g = np.asarray(means)
    return {"gain": round(float(np.mean(full)), 6), "lo": round(float(np.percentile(g, 2.5)), 6), "hi": round(float(np.percentile(g, 97.5)), 6),
            "p_better": round(float(np.mean(g > 0)), 3), "pairs": len(usable)}


def run_status(run_dir: Path) -> str | None:
    db = run_dir / "mcgs.db"
    if not db.is_file():
        return None
    con = sqlite3.connect(db)
    try:
        row = con.execute("select status from runs").fetchone()
    finally:
        con.close()
    return row[0] if row else None


def launch(task_dir: Path, run_dir: Path, policy: str, seed: int, budget: str, threads: int) -> None:
    """Run one search with ``mcgs run`` in a subprocess, unless its storage says finished."""
    if run_status(run_dir) == "finished":
        return
    if run_dir.exists():
        shutil.rmtree(run_dir)
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "mcgs", "run", str(task_dir), "--out", str(run_dir), "--time-budget", budget,
         "--seed", str(seed), "--policy", policy, "--cpu-threads", str(threads)],
        capture_output=True, text=True,
    )
    status = "ok" if r.returncode == 0 else f"exit {r.returncode}: {r.stderr[-300:]}"
    print(f"  {run_dir.name}: {time.monotonic() - t0:.0f}s {status}", flush=True)


def facts(run_dir: Path) -> dict:
    """What a finished run found: node counts, the final node and the best single node."""
    from mcgs.node import NodeRole

    search = open_search(run_dir)
    nodes = search.nodes()
    singles = [n for n in nodes if n.is_valid and n.operator.value != "ensemble"]
    best_single = min(singles, key=lambda n: (-n.score if search.task.higher_is_better else n.score, n.seq)) if singles else None
    final = search.final_node
    # the ensemble node built in the budget's reserved slice (there is none when greedy selection
    # kept a single node); the final submission may still be a single node (``final_node``)
    ensembles = [n for n in nodes if n.is_valid and n.role is NodeRole.FINAL_ENSEMBLE]
    final_ensemble = ensembles[-1] if ensembles else None
    return {
        "nodes": sum(1 for n in nodes if n.state.is_finished()),
        "valid": sum(n.is_valid for n in nodes),
        "operators": sorted({n.operator.value for n in nodes if n.parent_id is not None}),
        "final_operator": final.operator.value if final else None,
        "final_cv": final.score if final else None,
        "best_single_cv": best_single.score if best_single else None,
        "best_single_submission": str(search.node_dir(best_single) / "submission" / "submission.csv") if best_single else None,
        "final_ensemble_submission": str(search.node_dir(final_ensemble) / "submission" / "submission.csv") if final_ensemble else None,
    }


def operator_time(run_dirs: dict[str, list[Path]]) -> list[dict]:
    """Per policy and operator: nodes, valid nodes, candidate seconds and new global bests
    (a valid search node whose reward carries the new-best bonus), from the runs' storage."""
    out = []
    for policy, dirs in run_dirs.items():
        agg: dict[str, list[float]] = {}
        for d in dirs:
            for n in open_search(d).nodes():
                if n.parent_id is None or n.state.value in ("pending", "running"):
                    continue
                a = agg.setdefault(n.operator.value, [0, 0, 0.0, 0])
                a[0] += 1
                a[1] += n.is_valid
                a[2] += n.runtime_s or 0.0
                a[3] += bool(n.reward is not None and n.reward >= 1.0 and n.operator.value != "ensemble")
        for op, (k, v, t, best) in sorted(agg.items()):
            out.append({"policy": policy, "operator": op, "nodes": k, "valid": v, "seconds": round(t), "mean_s": round(t / k, 1) if k else 0.0,
                        "new_bests": best if op != "ensemble" else None})
    return out


def normalise(scores: list[float], lower_is_better: bool) -> list[float]:
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [((hi - s) if lower_is_better else (s - lo)) / (hi - lo) for s in scores]


def normalised_rows(rows: list[dict], key: str, tasks: list[str], lower: dict[str, bool], missing_is_worst: bool) -> list[tuple[dict, float]]:
    """``(row, normalised value of row[key])`` over the runs of each task (:func:`normalise`);
    a run without a value counts as the worst (0.0) when ``missing_is_worst``, else is left out."""
    out = []
    for t in tasks:
        trs = [r for r in rows if r["task"] == t and r[key] is not None]
        if not trs:
            continue
        out += list(zip(trs, normalise([r[key] for r in trs], lower[t])))
        if missing_is_worst:
            out += [(r, 0.0) for r in rows if r["task"] == t and r[key] is None]
    return out


def per_task_means(scored: list[tuple[dict, float]]) -> dict[tuple[str, str], float]:
    """Mean normalised value per (task, policy)."""
    acc: dict[tuple[str, str], list[float]] = {}
    for r, v in scored:
        acc.setdefault((r["task"], r["policy"]), []).append(v)
    return {k: statistics.mean(v) for k, v in acc.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--tasks", default=",".join((*MLEBENCH_TASKS, HOUSE)))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-budget", default="5m")
    ap.add_argument("--parallel-runs", type=int, default=1, help="searches at once; the 2 cores are split evenly between them")
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()
    parse_duration(args.time_budget)  # fail early on a bad budget
    threads = max(1, (os.cpu_count() or 2) // args.parallel_runs)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    data = args.work / "data"
    args.work.mkdir(parents=True, exist_ok=True)
    results_path = args.work / "results.json"
    jobs = []
    for task_id in tasks:
        task_dir = prepare_task(task_id, args.shared, data)
        for seed in args.seeds:
            for policy in policies:
                jobs.append((task_id, task_dir, policy, seed, args.work / "runs" / f"{task_id}-{policy}-seed{seed}"))
    with ThreadPoolExecutor(max_workers=args.parallel_runs) as pool:
        list(pool.map(lambda j: launch(j[1], j[4], j[2], j[3], args.time_budget, threads), jobs))
    rows: list[dict] = []
    for task_id, _, policy, seed, run_dir in jobs:
        if run_status(run_dir) != "finished":
            print(f"  {run_dir.name}: not finished, left out", flush=True)
            continue
        f = facts(run_dir)
        final_submission = run_dir / "best" / "submission.csv"
        row = {
            "task": task_id,
            "policy": policy,
            "seed": seed,
            **f,
            "submission": str(final_submission),
            "score": grade(task_id, final_submission, data),
            "best_single_score": grade(task_id, Path(f["best_single_submission"]), data) if f["best_single_submission"] else None,
            "final_ensemble_score": grade(task_id, Path(f["final_ensemble_submission"]), data) if f["final_ensemble_submission"] else None,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)

    lower = {t: not get_metric("rmsle" if t == HOUSE else _metric_of(data, t)).higher_is_better for t in tasks}
    scored = normalised_rows(rows, "score", tasks, lower, missing_is_worst=True)  # an invalid submission is the worst run
    for r, v in scored:
        r["normalised"] = v
    per_task = per_task_means(scored)
    # the same normalisation of the best single node (no ensemble, no final choice): by its CV
    # score (the search's own out-of-fold estimate over all training rows, far less noisy than
    # a 99- to 870-row held-out split; single nodes only, an ensemble's OOF score is fitted on
    # those rows) and by its held-out score
    single_norm = {key: per_task_means(normalised_rows(rows, key, tasks, lower, missing_is_worst=False))
                   for key in ("best_single_cv", "best_single_score")}
    summary = {}
    for p in policies:
        vals = [per_task[(t, p)] for t in tasks if (t, p) in per_task]
        won = sum(1 for t in tasks if (t, p) in per_task and per_task[(t, p)] == max(per_task.get((t, q), -1) for q in policies))
        summary[p] = {"mean_normalised": statistics.mean(vals) if vals else None, "tasks_won": won}
        for key, table in single_norm.items():
            v = [table[(t, p)] for t in tasks if (t, p) in table]
            summary[p][f"mean_normalised_{key}"] = statistics.mean(v) if v else None
    ens = {}
    for t in tasks:
        mr = [r for r in rows if r["task"] == t and r["policy"] == "mcgs" and r["score"] is not None and r["best_single_score"] is not None]
        if mr:
            f, b = round(statistics.median(r["score"] for r in mr), 6), round(statistics.median(r["best_single_score"] for r in mr), 6)
            ens[t] = {"final": f, "best_single": b, "final_beats_single": (f < b) if lower[t] else (f > b)}
            er = [r for r in mr if r["final_ensemble_score"] is not None]
            if er:  # the same comparison for the final ensemble node itself, over the runs that built one
                e = round(statistics.median(r["final_ensemble_score"] for r in er), 6)
                eb = round(statistics.median(r["best_single_score"] for r in er), 6)
                ens[t].update(final_ensemble=e, ensemble_runs=len(er), ensemble_best_single=eb, ensemble_beats_single=(e < eb) if lower[t] else (e > eb))
    for r in rows:  # how sure the held-out split is about the final ensemble against the best single node
        r["ensemble_advantage"] = (
            heldout_difference(r["task"], Path(r["final_ensemble_submission"]), Path(r["best_single_submission"]), data, lower[r["task"]])
            if r["policy"] == "mcgs" and r["final_ensemble_submission"] and r["best_single_submission"] else None
        )
    # the same questions over all seeds at once, with the held-out rows' noise (shared by every
    # seed) and the seeds' noise both resampled: is a bar's reading more than noise?
    pooled = []
    for t in tasks:
        by = {(r["policy"], r["seed"]): r for r in rows if r["task"] == t}
        pairs = [(Path(r["final_ensemble_submission"]), Path(r["best_single_submission"])) for (q, _), r in sorted(by.items())
                 if q == "mcgs" and r["final_ensemble_submission"] and r["best_single_submission"]]
        comparisons = [("final ensemble vs best single node (mcgs)", pairs)]
        for other in (q for q in policies if q != "mcgs"):
            seeds = [s for s in args.seeds if ("mcgs", s) in by and (other, s) in by]
            comparisons.append((f"mcgs vs {other}, final submission", [(Path(by[("mcgs", s)]["submission"]), Path(by[(other, s)]["submission"])) for s in seeds]))
        for name, prs in comparisons:
            d = pooled_heldout_difference(t, prs, data, lower[t]) if prs else None
            if d is not None:
                pooled.append({"task": t, "comparison": name, **d})
    finished = {p: [j[4] for j in jobs if j[2] == p and run_status(j[4]) == "finished"] for p in policies}
    time_rows = operator_time(finished)
    out = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB",
        "command": " ".join(sys.argv),
        "rows": rows,
        "per_task": {f"{t}/{p}": v for (t, p), v in per_task.items()},
        **{f"per_task_{key}": {f"{t}/{p}": v for (t, p), v in table.items()} for key, table in single_norm.items()},
        "summary": summary,
        "ensemble_vs_best_single": ens,
        "pooled_heldout_differences": pooled,
        "operator_time": time_rows,
    }
    results_path.write_text(json.dumps(out, indent=2))
    if args.report:
        lines = [
            f"# Ablation: MCGS vs tree-only UCT vs AIDE's greedy policy ({out['date']})",
            "",
            f"Machine: {out['machine']}. Budget per run: {args.time_budget}, {args.parallel_runs} run(s) at a time with {threads} thread(s) each. "
            f"Seeds: {' '.join(map(str, args.seeds))}. Command: `{out['command']}`",
            "",
            "Normalised score per task = (score - worst) / (best - worst) over all runs of the task (1 = best), mean over seeds.",
            "",
            "| policy | " + " | ".join(tasks) + " | mean | tasks won |",
            "|---|" + "---|" * len(tasks) + "---|---|",
        ]
        for p in policies:
            cells = [f"{per_task[(t, p)]:.3f}" if (t, p) in per_task else "-" for t in tasks]
            m = summary[p]["mean_normalised"]
            lines.append(f"| {p} | " + " | ".join(cells) + f" | {m:.3f} | {summary[p]['tasks_won']} |" if m is not None else f"| {p} | - | - |")
        for key, title in (("best_single_cv", "The best single node by CV, normalised the same way on its CV score (out-of-fold over all training rows; "
                                               "not the acceptance measure, shown because the held-out splits have 99 to 870 rows):"),
                           ("best_single_score", "The same node, normalised on its held-out score (the search's product before the final "
                                                 "ensemble and the final choice, which are the same code for every policy):")):
            lines += ["", title, "", "| policy | " + " | ".join(tasks) + " | mean |", "|---|" + "---|" * len(tasks) + "---|"]
            for p in policies:
                cells = [f"{single_norm[key][(t, p)]:.3f}" if (t, p) in single_norm[key] else "-" for t in tasks]
                m = summary[p][f"mean_normalised_{key}"]
                lines.append(f"| {p} | " + " | ".join(cells) + (f" | {m:.3f} |" if m is not None else " | - |"))
        lines += ["", "Final submission and final ensemble node against the best single node by CV (mcgs policy, held-out score, "
                  "median over seeds; the ensemble columns over the runs that built a final ensemble):", "",
                  "| task | final submission | best single node | submission better | final ensemble (runs) | best single node, same runs | ensemble better |",
                  "|---|---|---|---|---|---|---|"]
        for t, e in ens.items():
            ecells = (f"{e['final_ensemble']} ({e['ensemble_runs']}) | {e['ensemble_best_single']} | {e['ensemble_beats_single']}"
                      if "final_ensemble" in e else "- (0) | - | -")
            lines.append(f"| {t} | {e['final']} | {e['best_single']} | {e['final_beats_single']} | {ecells} |")
        lines += ["", "The same comparison run by run (mcgs policy), with how sure the held-out split is: the ensemble's advantage "
                  "(positive = better than the best single node, metric units) and a paired bootstrap over the held-out rows "
                  "(1000 resamples, the same rows for both submissions; 95 % percentile interval, share of resamples where the ensemble is better):", "",
                  "| task | seed | final ensemble | best single node | advantage | 95 % interval | resamples better |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            a = r.get("ensemble_advantage")
            if a is not None:
                lines.append(f"| {r['task']} | {r['seed']} | {r['final_ensemble_score']} | {r['best_single_score']} | {a['gain']:+.5f} | "
                             f"[{a['lo']:+.5f}, {a['hi']:+.5f}] | {a['p_better']:.0%} |")
        lines += ["", "Over all seeds at once: the mean held-out advantage of the first over the second (positive = better, metric "
                  "units), with a two-way bootstrap (1000 resamples; each draws the held-out rows, the same for every submission, "
                  "and the seeds, with replacement; 95 % percentile interval, share of resamples where the first is better). Every "
                  "seed is graded on the same held-out rows, so their noise does not average out over seeds; an interval that "
                  "includes zero says the split cannot tell the two apart:", "",
                  "| task | comparison | seeds | mean advantage | 95 % interval | resamples better |", "|---|---|---|---|---|---|"]
        for d in pooled:
            lines.append(f"| {d['task']} | {d['comparison']} | {d['pairs']} | {d['gain']:+.5f} | [{d['lo']:+.5f}, {d['hi']:+.5f}] | {d['p_better']:.0%} |")
        lines += ["", "Per run:", "", "| task | policy | seed | nodes (valid) | final operator | CV | held-out score | best single held-out | final ensemble held-out |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            cv = f"{r['final_cv']:.5f}" if r["final_cv"] is not None else "-"
            fe = r["final_ensemble_score"] if r["final_ensemble_score"] is not None else "-"
            lines.append(f"| {r['task']} | {r['policy']} | {r['seed']} | {r['nodes']} ({r['valid']}) | {r['final_operator']} | {cv} | {r['score']} | {r['best_single_score']} | {fe} |")
        lines += ["", "Where the time went (all finished runs, from their storage):", "",
                  "| policy | operator | nodes | valid | candidate time (s) | mean per node (s) | new global bests |", "|---|---|---|---|---|---|---|"]
        for r in time_rows:
            lines.append(f"| {r['policy']} | {r['operator']} | {r['nodes']} | {r['valid']} | {r['seconds']} | {r['mean_s']} | {r['new_bests'] if r['new_bests'] is not None else '-'} |")
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
    return 0


def _metric_of(data: Path, task_id: str) -> str:
    from mcgs.task import load_task

    return load_task(data / task_id).metric


if __name__ == "__main__":
    sys.exit(main())
