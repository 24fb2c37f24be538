"""Ablation under LLM-like faults: the policies (mcgs, tree, greedy) with the simulated coder
(``--coder simulated``, :mod:`mcgs.coders.simulated`) at several fault rates.

The simulated coder writes the recipe coder's programs and breaks a share of them as
LLM-written programs break (a syntax error, a misspelt column, an OOF table a row short, a
deleted submission, a run past the timeout, a leak that inflates the OOF score); Debug repairs
what it broke at ``--repair-rate``. For each policy and fault rate the report gives, over tasks
and seeds:

* **valid submission**: runs that handed in a submission the task's grader scores;
* **wasted nodes** per run: nodes that failed, and Debug nodes (a repaired Debug node reruns a
  program the search already had; a failed one is a failed node): candidates the search did
  not get to use; the failed and Debug nodes are also given apart;
* **handed in a rescue**: runs whose final node (or a member of its final ensemble) is a rescue
  draft (the recipe coder's cheapest program once half the budget passed with no valid node:
  docs/search.md, "Rescue drafts");
* **leaks chosen**: runs whose final node (or a member of its final ensemble) ran with a leak;
* **caught by review**: with ``--review-rates`` above 0, the simulated Code Review
  (``MCGS_SIMULATED_REVIEW_RATE``) catches that share of the faults and the node runs the
  revision; the faults it caught per run, and the leaks among them;
* **normalised score**: ``(score - worst) / (best - worst)`` over every run of the task (1 =
  best; an invalid submission counts as the worst), mean over seeds.

Tasks as :mod:`experiments.ablation` (the MLE-bench splits and the house-prices holdout).
Resumable: a finished run is only graded. ``--parallel-runs 2`` runs two searches at once with
one core each (every policy and fault rate under the same conditions).

Usage (from the repository root)::

    .venv/bin/python experiments/ablation_faults.py --shared ../shared/data --work /tmp/mcgs-faults \\
        --time-budget 2m --seeds 0 1 2 --fault-rates 0.4 0.2 0 --parallel-runs 2 --report docs/results/ablation_faults/table.md

and the Code Review's worth at the highest fault rate (the runs without review are reused)::

    .venv/bin/python experiments/ablation_faults.py --shared ../shared/data --work /tmp/mcgs-faults \\
        --time-budget 2m --seeds 0 1 2 --fault-rates 0.4 --review-rates 0 0.5 --policies mcgs --parallel-runs 2 \\
        --report docs/results/ablation_faults/review.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ablation import HOUSE, MLEBENCH_TASKS, POLICIES, _metric_of, grade, normalised_rows, per_task_means, prepare_task, run_status  # noqa: E402

from mcgs.metrics import get_metric  # noqa: E402
from mcgs.search import open_search  # noqa: E402
from mcgs.settings import parse_duration  # noqa: E402
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def launch(task_dir: Path, run_dir: Path, policy: str, seed: int, fault_rate: float, repair_rate: float, budget: str, threads: int,
           review_rate: float = 0.0) -> None:
    """One ``mcgs run --coder simulated`` in a subprocess, unless its storage says finished."""
    if run_status(run_dir) == "finished":
        return
    if run_dir.exists():
        shutil.rmtree(run_dir)
    env = {**os.environ, "MCGS_SIMULATED_FAULT_RATE": str(fault_rate), "MCGS_SIMULATED_REPAIR_RATE": str(repair_rate),
           "MCGS_SIMULATED_REVIEW_RATE": str(review_rate)}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mcgs", "run", str(task_dir), "--out", str(run_dir), "--time-budget", budget, "--seed", str(seed),
                        "--policy", policy, "--cpu-threads", str(threads), "--coder", "simulated"], capture_output=True, text=True, env=env)
    print(f"  {run_dir.name}: {time.monotonic() - t0:.0f}s {'ok' if r.returncode == 0 else 'exit %d: %s' % (r.returncode, r.stderr[-300:])}", flush=True)


def _caught(node) -> str | None:
    """The fault the Code Review's model review took out of ``node``'s program (the node then runs
    the revision, so its config's ``simulated_fault`` no longer applies), or None."""
    model_review = node.review.get("model_review") if isinstance(node.review, dict) else None
    if model_review and model_review.get("verdict") == "revise":
        return node.config.get("simulated_fault")
    return None


def _live_fault(node) -> str | None:
    """The fault ``node``'s program ran with: its injected fault unless the review removed it."""
    return None if _caught(node) else node.config.get("simulated_fault")


def run_facts(run_dir: Path) -> dict:
    """Failed, Debug and faulted nodes of a finished run, the faults its Code Review caught, and
    whether its final choice leaks."""
    search = open_search(run_dir)
    nodes = [n for n in search.nodes() if n.parent_id is not None and n.operator.value != "ensemble" and n.state.is_finished()]
    final = search.final_node
    by_id = {n.id: n for n in search.nodes()}
    chosen = [final] if final is not None else []
    if final is not None and final.operator.value == "ensemble":
        chosen = [by_id[int(i)] for i in final.config.get("weights", {}) if int(i) in by_id]
    return {
        "nodes": len(nodes), "valid": sum(n.is_valid for n in nodes), "failed": sum(not n.is_valid for n in nodes),
        "debug": sum(n.operator.value == "debug" for n in nodes),
        "wasted": sum(not n.is_valid or n.operator.value == "debug" for n in nodes), "faulted": sum(bool(n.config.get("simulated_fault")) for n in nodes),
        "caught": sum(bool(_caught(n)) for n in nodes), "leaks_caught": sum(_caught(n) == "leak" for n in nodes),
        "repaired": sum(bool(n.config.get("repaired")) for n in nodes),
        "leak_chosen": any(_live_fault(n) == "leak" for n in chosen),
        "rescues": sum(bool(n.config.get("rescue")) for n in nodes), "rescued": any(n.config.get("rescue") for n in chosen),
    }


def _mean(rows: list[dict], key: str) -> float:
    return statistics.mean(r[key] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--tasks", default=",".join((*MLEBENCH_TASKS, HOUSE)))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--fault-rates", type=float, nargs="+", default=[0.0, 0.2, 0.4])
    ap.add_argument("--repair-rate", type=float, default=0.7)
    ap.add_argument("--review-rates", type=float, nargs="+", default=[0.0],
                    help="shares of faults the simulated Code Review catches (0 = no review); a run with a review gets a '-review<rate>' suffix")
    ap.add_argument("--time-budget", default="3m")
    ap.add_argument("--report", type=Path)
    ap.add_argument("--parallel-runs", type=int, default=1, help="searches at once; the cores are split evenly between them")
    args = ap.parse_args()
    parse_duration(args.time_budget)
    threads = max(1, (os.cpu_count() or 2) // args.parallel_runs)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    data = args.work / "data"
    args.work.mkdir(parents=True, exist_ok=True)
    task_dirs = {task_id: prepare_task(task_id, args.shared, data) for task_id in tasks}
    # rate by rate, so that a sitting cut short has whole fault rates over every task
    jobs = [(task_id, task_dirs[task_id], policy, rate, seed, review,
             args.work / "runs" / f"{task_id}-{policy}-fault{rate:g}-seed{seed}{f'-review{review:g}' if review > 0 else ''}")
            for rate in args.fault_rates for review in args.review_rates for seed in args.seeds for task_id in tasks for policy in policies]
    def run_job(job: tuple) -> None:
        _, task_dir, policy, rate, seed, review, run_dir = job
        launch(task_dir, run_dir, policy, seed, rate, args.repair_rate, args.time_budget, threads, review)

    with ThreadPoolExecutor(max_workers=args.parallel_runs) as pool:
        list(pool.map(run_job, jobs))
    rows = []
    for task_id, _, policy, rate, seed, review, run_dir in jobs:
        if run_status(run_dir) != "finished":
            continue
        sub = run_dir / "best" / "submission.csv"
        rows.append({"task": task_id, "policy": policy, "fault_rate": rate, "review_rate": review, "seed": seed, **run_facts(run_dir),
                     "score": grade(task_id, sub, data) if sub.is_file() else None})
        print(json.dumps(rows[-1]), flush=True)
    lower = {t: not get_metric("rmsle" if t == HOUSE else _metric_of(data, t)).higher_is_better for t in tasks}
    for r, v in normalised_rows(rows, "score", tasks, lower, missing_is_worst=True):
        r["normalised"] = v
    table = []
    for rate, review, p in itertools.product(sorted(args.fault_rates), sorted(args.review_rates), policies):
        rs = [r for r in rows if r["policy"] == p and r["fault_rate"] == rate and r["review_rate"] == review]
        if not rs:
            continue
        per_task = per_task_means([(r, r["normalised"]) for r in rs])
        table.append({"fault_rate": rate, "review_rate": review, "policy": p, "runs": len(rs), "valid_submissions": sum(r["score"] is not None for r in rs),
                      "nodes_per_run": _mean(rs, "nodes"), "wasted_per_run": _mean(rs, "wasted"), "failed_per_run": _mean(rs, "failed"), "debug_per_run": _mean(rs, "debug"),
                      "repaired_per_run": _mean(rs, "repaired"), "leaks_chosen": sum(r["leak_chosen"] for r in rs), "caught_per_run": _mean(rs, "caught"),
                      "leaks_caught": sum(r["leaks_caught"] for r in rs), "rescued": sum(bool(r.get("rescued")) for r in rs),
                      "normalised": statistics.mean(per_task.values())})
    out = {"date": dt.datetime.now().isoformat(timespec="seconds"), "command": " ".join(sys.argv), "rows": rows, "table": table}
    (args.work / "results_faults.json").write_text(json.dumps(out, indent=2))
    if args.report:
        lines = [f"# Ablation under simulated LLM faults ({out['date']})", "", f"Command: `{out['command']}`", "",
                 f"Repair rate {args.repair_rate}; review rates {' '.join(f'{r:g}' for r in args.review_rates)}; budget {args.time_budget} per run, {args.parallel_runs} run(s) at a time with {threads} thread(s) each; tasks {', '.join(tasks)}; seeds {' '.join(map(str, args.seeds))}.", "",
                 "| fault rate | review rate | policy | runs | valid submissions | handed in a rescue | nodes per run | wasted per run | failed per run | Debug per run | repaired per run | leaks chosen | caught by review per run | leaks caught | normalised score |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for t in table:
            lines.append(f"| {t['fault_rate']:g} | {t['review_rate']:g} | {t['policy']} | {t['runs']} | {t['valid_submissions']} | {t['rescued']} | {t['nodes_per_run']:.1f} | "
                         f"{t['wasted_per_run']:.1f} | {t['failed_per_run']:.1f} | "
                         f"{t['debug_per_run']:.1f} | {t['repaired_per_run']:.1f} | {t['leaks_chosen']} | {t['caught_per_run']:.1f} | {t['leaks_caught']} | {t['normalised']:.3f} |")
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
