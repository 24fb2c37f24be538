"""Search and grade MLE-bench competitions offline, per competition and seed.

For each competition: ``mcgs mlebench prepare`` (from ../shared/data/<id>/raw), then for each
seed ``mcgs run`` with the given budget and ``mcgs mlebench grade``. Writes
``WORK/results.json`` and, with ``--report``, a Markdown table (median over seeds against the
grader's own median and medal fields).

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/mlebench_runs.py --work /tmp/mcgs-mlebench \
        --competitions nomad2018-predict-transparent-conductors,leaf-classification \
        --seeds 0 1 2 --time-budget 10m --report docs/results/mlebench_tabular.md

A rerun skips (competition, seed) pairs whose run already finished.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spaceship_titanic import best_cv, mcgs, node_count  # noqa: E402

from mcgs.sandbox import live_candidates  # noqa: E402


def finished(run_dir: Path) -> bool:
    import sqlite3

    if not (run_dir / "mcgs.db").is_file():
        return False
    con = sqlite3.connect(run_dir / "mcgs.db")
    try:
        return con.execute("select status from runs").fetchone()[0] == "finished"
    finally:
        con.close()


def _commit() -> str:
    import subprocess

    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).resolve().parent)
    return r.stdout.strip() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"), help="folder holding <id>/raw for each competition")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--competitions", required=True, help="comma-separated competition ids")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-budget", default="10m")
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()

    data = args.work / "data"
    results = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB",
        "time_budget": args.time_budget,
        "command": " ".join(sys.argv),
        "commit": _commit(),
        "competitions": {},
    }
    for comp in [c.strip() for c in args.competitions.split(",") if c.strip()]:
        r = mcgs("mlebench", "prepare", comp, "--raw", str(args.shared / comp / "raw"), "--out", str(data))
        if r.returncode:
            print(r.stderr)
            return 1
        rows = []
        for seed in args.seeds:
            run_dir = args.work / f"{comp}-seed{seed}"
            t0 = time.monotonic()
            if not finished(run_dir):
                if run_dir.exists():
                    shutil.rmtree(run_dir)
                r = mcgs("run", str(data / comp), "--out", str(run_dir), "--time-budget", args.time_budget, "--seed", str(seed))
                if r.returncode:
                    print(r.stdout[-2000:], r.stderr[-2000:])
            g = mcgs("mlebench", "grade", comp, str(run_dir / "best" / "submission.csv"), "--data", str(data), "--json")
            report = json.loads(g.stdout) if g.returncode == 0 else {"valid_submission": False, "error": g.stderr[-500:]}
            total, valid = node_count(run_dir)
            row = {"seed": seed, "wall_s": round(time.monotonic() - t0, 1), "nodes": total, "valid_nodes": valid, "cv": best_cv(run_dir), "candidates_alive_after_exit": len(live_candidates(under=run_dir)), **report}
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
        scores = [x["score"] for x in rows if x.get("score") is not None]
        lower = rows[0].get("is_lower_better")
        med = statistics.median(scores) if scores else None
        bar = rows[0].get("median_threshold")
        results["competitions"][comp] = {
            "runs": rows,
            "median_score": med,
            "median_threshold": bar,
            "median_beats_median": None if med is None or bar is None else (med < bar if lower else med > bar),
            "valid_submissions": f"{sum(bool(x.get('valid_submission')) for x in rows)}/{len(rows)}",
        }
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "results.json").write_text(json.dumps(results, indent=2, default=str))
    if args.report:
        lines = [
            f"# MLE-bench runs ({results['date']})",
            "",
            f"Machine: {results['machine']}. Commit {results['commit']}. Budget per run: {args.time_budget}. Command: `{results['command']}`",
            "",
            "| competition | seeds | valid | nodes (min) | median private score | grader median | beats median | medals |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for comp, c in results["competitions"].items():
            medals = ", ".join("gold" if x.get("gold_medal") else "silver" if x.get("silver_medal") else "bronze" if x.get("bronze_medal") else "-" for x in c["runs"])
            lines.append(f"| {comp} | {len(c['runs'])} | {c['valid_submissions']} | {min(x['nodes'] for x in c['runs'])} | {c['median_score']} | {c['median_threshold']} | {c['median_beats_median']} | {medals} |")
        lines += ["", "Per run:", "", "| competition | seed | nodes (valid) | CV score | private score | medal | wall s | candidates alive after exit |", "|---|---|---|---|---|---|---|---|"]
        for comp, c in results["competitions"].items():
            for x in c["runs"]:
                medal = "gold" if x.get("gold_medal") else "silver" if x.get("silver_medal") else "bronze" if x.get("bronze_medal") else "-"
                cv = f"{x['cv']:.5f}" if isinstance(x.get("cv"), float) else x.get("cv")
                lines.append(f"| {comp} | {x['seed']} | {x['nodes']} ({x['valid_nodes']}) | {cv} | {x.get('score')} | {medal} | {x['wall_s']} | {x['candidates_alive_after_exit']} |")
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
