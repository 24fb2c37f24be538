"""A search on a large suite task: its valid nodes and the peak memory of engine plus candidates
(issue 33: on the >= 1 M-row task, a valid submission and >= 5 full-fidelity valid nodes with the
peak memory of engine plus candidates below 8 GiB).

``mcgs run`` runs as a child process (recipe coder); every 0.5 s the resident memory of its
whole process tree is summed (psutil; RSS, which counts pages shared between processes once per
process, so the figure is an upper bound). At the end the submission is graded on the suite's
answers and the valid nodes are counted per fidelity (:mod:`mcgs.fidelity`: full fidelity is the
data and fold scheme the final choice uses; lower ones are successive halving's subsamples).
Whether the engine's own work on large outputs (reading and scoring each node's OOF predictions,
selecting ensembles over them) slows the search shows in the share of the wall time outside the
candidate programs: ``1 - sum(candidate run times) / wall`` (plan screening and the engine's
start count as outside too).

Usage (from the repository root; the suite built by experiments/suite.py)::

    .venv/bin/python experiments/scale_memory.py --suite /tmp/mcgs-suite --task military_branch \\
        --time-budget 10m --work /tmp/mcgs-scale --report docs/results/scale_memory.md
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import psutil
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def tree_rss(pid: int) -> int:
    """Bytes of resident memory of ``pid`` and its descendants now."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def main(argv: list[str] | None = None) -> int:
    from mcgs.mlebench.bench import grade_suite_submission
    from mcgs.snapshot import load_run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, required=True)
    parser.add_argument("--task", default="military_branch")
    parser.add_argument("--time-budget", default="10m")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--report", type=Path)
    parser.add_argument("--append", action="store_true", help="add to the report instead of replacing it")
    args = parser.parse_args(argv)
    run_dir = args.work / "run"
    cmd = [sys.executable, "-m", "mcgs", "run", str(args.suite / "tasks" / args.task), "--out", str(run_dir),
           "--time-budget", args.time_budget, "--coder", "recipe", "--seed", "0"]
    args.work.mkdir(parents=True, exist_ok=True)
    peak, start = 0, time.monotonic()
    with open(args.work / "stdout.txt", "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.5)
    wall = time.monotonic() - start
    snap = load_run(run_dir)
    valid = [n for n in snap.search_nodes if n.state.value == "valid" and n.full_fidelity]
    low = [n for n in snap.search_nodes if not n.full_fidelity]
    low_valid = [n for n in low if n.state.value == "valid"]
    promoted = [n for n in snap.search_nodes if "promoted_from" in n.config]
    candidates_s = sum(n.runtime_s or 0.0 for n in snap.nodes if n.parent_id is not None)
    grade = grade_suite_submission(args.suite, args.task, run_dir / "best" / "submission.csv")
    rows = snap.task.n_train + snap.task.n_test
    lines = [
        f"# A search on {args.task} ({rows:,} rows): valid nodes and peak memory", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores. `mcgs run` exit code {proc.returncode}, wall {wall:.0f} s; "
        f"validation: {snap.task.validation.kind} ({snap.task.validation.n_splits}).", "",
        "| figure | value |", "|---|---|",
        f"| valid full-fidelity nodes | {len(valid)} of {len(snap.search_nodes) - len(low)} |",
        f"| valid low-fidelity nodes (successive halving) | {len(low_valid)} of {len(low)} |",
        f"| promotions (to the next rung) | {len(promoted)} |",
        f"| held-out {snap.task.metric} of the submission | {grade['score']} (valid: {grade['valid_submission']}) |",
        f"| peak resident memory of engine + candidates (sum of RSS) | {peak / 2**30:.2f} GiB |",
        f"| wall time outside candidate programs (engine, screening, start) | {wall - candidates_s:.0f} s of {wall:.0f} s ({1 - candidates_s / wall:.1%}) |", "",
        f"Command: `python experiments/scale_memory.py --suite SUITE --task {args.task} --time-budget {args.time_budget} "
        f"--work WORK --report {args.report}`",
    ]
    page = "\n".join(lines) + "\n"
    print(page)
    if args.report:
        args.report.write_text((args.report.read_text() + "\n" if args.append and args.report.is_file() else "") + page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
