"""Acceptance experiment of the walking skeleton on spaceship-titanic (MLE-bench lite).

For each seed: ``mcgs run`` with a 10-minute budget on the MLE-bench split, then
``mcgs mlebench grade``; checks that every submission is valid, counts the nodes in each run's
database, and checks that no candidate process is alive after the run. Then runs the same
search on a copy of the task whose column names are replaced by meaningless ones and compares
the best CV scores (no dataset-specific recipes).

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/spaceship_titanic.py --raw ../shared/data/spaceship-titanic \
        --work /tmp/mcgs-spaceship --seeds 0 1 2 --time-budget 10m

Writes ``WORK/results.json`` and prints a table; ``--report`` also writes a Markdown summary.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import psutil
import yaml

from mcgs.sandbox import live_candidates

COMPETITION = "spaceship-titanic"


def sh(*args: str) -> subprocess.CompletedProcess:
    print("$", " ".join(args), flush=True)
    return subprocess.run(args, text=True, capture_output=True)


def mcgs(*args: str) -> subprocess.CompletedProcess:
    return sh(sys.executable, "-m", "mcgs", *args)


def node_count(run_dir: Path) -> tuple[int, int]:
    con = sqlite3.connect(run_dir / "mcgs.db")
    try:
        total = con.execute("select count(*) from nodes where operator != 'root' and state not in ('interrupted','pending','running')").fetchone()[0]
        valid = con.execute("select count(*) from nodes where state = 'valid'").fetchone()[0]
    finally:
        con.close()
    return total, valid


def best_cv(run_dir: Path) -> float | None:
    info = run_dir / "best" / "node.json"
    return json.loads(info.read_text())["score"] if info.is_file() else None


def renamed_copy(prepared: Path, dest: Path) -> Path:
    """Copy the public split with every column renamed to ``col_<k>`` (target and id too)."""
    public = prepared / "prepared" / "public"
    train = pd.read_csv(public / "train.csv")
    test = pd.read_csv(public / "test.csv")
    sample = pd.read_csv(public / "sample_submission.csv")
    mapping = {c: f"col_{k:02d}" for k, c in enumerate(train.columns)}
    dest.mkdir(parents=True, exist_ok=True)
    train.rename(columns=mapping).to_csv(dest / "train.csv", index=False)
    test.rename(columns=mapping).to_csv(dest / "test.csv", index=False)
    sample.rename(columns=mapping).to_csv(dest / "sample_submission.csv", index=False)
    (dest / "task.yaml").write_text(yaml.safe_dump({"name": "renamed-columns", "metric": "accuracy"}))
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", type=Path, default=Path("../shared/data/spaceship-titanic"), help="the competition folder in shared/data (raw/ + mlebench/)")
    ap.add_argument("--work", type=Path, required=True, help="scratch folder for prepared data and runs")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-budget", default="10m")
    ap.add_argument("--skip-renamed", action="store_true")
    ap.add_argument("--report", type=Path, help="write a Markdown summary here")
    args = ap.parse_args()

    work = args.work
    data = work / "data"
    r = mcgs("mlebench", "prepare", COMPETITION, "--raw", str(args.raw / "raw"), "--out", str(data))
    if r.returncode:
        print(r.stdout, r.stderr)
        return 1
    results = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": f"{platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB", "time_budget": args.time_budget, "runs": []}
    for seed in args.seeds:
        run_dir = work / f"run-seed{seed}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        t0 = time.monotonic()
        r = mcgs("run", str(data / COMPETITION), "--out", str(run_dir), "--time-budget", args.time_budget, "--seed", str(seed))
        wall = time.monotonic() - t0
        if r.returncode:
            print(r.stdout[-3000:], r.stderr[-3000:])
        alive = live_candidates(under=run_dir)
        g = mcgs("mlebench", "grade", COMPETITION, str(run_dir / "best" / "submission.csv"), "--data", str(data), "--json")
        report = json.loads(g.stdout) if g.returncode == 0 else {"valid_submission": False, "error": g.stderr}
        total, valid = node_count(run_dir)
        row = {"seed": seed, "wall_s": round(wall, 1), "nodes": total, "valid_nodes": valid, "cv_accuracy": best_cv(run_dir), "candidates_alive_after_exit": len(alive), **report}
        results["runs"].append(row)
        print(json.dumps(row, indent=1, default=str), flush=True)
    if not args.skip_renamed:
        seed = args.seeds[0]
        ren = renamed_copy(data / COMPETITION, work / "renamed-task")
        run_dir = work / f"run-renamed-seed{seed}"
        if run_dir.exists():
            shutil.rmtree(run_dir)
        r = mcgs("run", str(ren), "--out", str(run_dir), "--time-budget", args.time_budget, "--seed", str(seed))
        original = next(x for x in results["runs"] if x["seed"] == seed)["cv_accuracy"]
        renamed = best_cv(run_dir)
        results["renamed"] = {"seed": seed, "cv_accuracy_original": original, "cv_accuracy_renamed": renamed, "abs_difference": None if renamed is None or original is None else round(abs(renamed - original), 5), "nodes": node_count(run_dir)[0]}
        print(json.dumps(results["renamed"], indent=1), flush=True)

    scores = sorted(x["score"] for x in results["runs"] if x.get("score") is not None)
    bronze = results["runs"][0].get("bronze_threshold")
    median = scores[len(scores) // 2] if scores else None
    results["summary"] = {
        "valid_submissions": f"{sum(bool(x.get('valid_submission')) for x in results['runs'])}/{len(results['runs'])}",
        "median_private_accuracy": median,
        "bronze_threshold": bronze,
        "median_reaches_bronze": median is not None and bronze is not None and median >= bronze,
        "min_nodes": min(x["nodes"] for x in results["runs"]),
        "candidates_alive_after_exit": sum(x["candidates_alive_after_exit"] for x in results["runs"]),
    }
    (work / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results["summary"], indent=1))
    if args.report:
        lines = [
            f"# spaceship-titanic acceptance run ({results['date']})",
            "",
            f"Machine: {results['machine']}. Budget per run: {args.time_budget}. Command: `python experiments/spaceship_titanic.py --work {work} --seeds {' '.join(map(str, args.seeds))} --time-budget {args.time_budget}`",
            "",
            "| seed | nodes (valid) | best CV accuracy | private accuracy | bronze bar | medal | valid submission | candidates alive after exit |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for x in results["runs"]:
            medal = "gold" if x.get("gold_medal") else "silver" if x.get("silver_medal") else "bronze" if x.get("bronze_medal") else "none"
            lines.append(f"| {x['seed']} | {x['nodes']} ({x['valid_nodes']}) | {x['cv_accuracy']} | {x.get('score')} | {x.get('bronze_threshold')} | {medal} | {x.get('valid_submission')} | {x['candidates_alive_after_exit']} |")
        lines += ["", f"Summary: `{json.dumps(results['summary'])}`"]
        if "renamed" in results:
            lines += ["", f"Renamed columns: `{json.dumps(results['renamed'])}`"]
        args.report.write_text("\n".join(lines) + "\n")
    ok = results["summary"]["median_reaches_bronze"] and results["summary"]["valid_submissions"].startswith(str(len(results["runs"])))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
