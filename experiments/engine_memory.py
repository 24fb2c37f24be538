"""Engine memory over a long run: resident memory of the engine process after 30 and after
300 finished candidates (issue 8: within +10 %).

The engine is the process that selects, writes, launches, scores and stores; candidates run in
their own processes and are not counted. To reach 300 candidates in minutes, the coder writes a
program that needs no library (constant predictions, the sample submission) for every
operator; selection, storage, the graph rebuild, scoring of OOF predictions, rewards, exports
and the sandbox are the real ones, and ensembles are on (their selection reads every valid
node's predictions). Memory is sampled with psutil in the node callback, after a full garbage
collection, as RSS and as USS (memory unique to the process).

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/engine_memory.py --work /tmp/mcgs-memory --nodes 300 \\
        --report docs/results/engine_memory.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import psutil

from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.contract import constant_program
from mcgs.demo import build_demo_task
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)

class ConstantCoder:
    """Writes a constant-prediction program for every request (the value varies with the node
    so programs differ); a stand-in for a coder when the engine, not the models, is measured."""

    name = "constant"

    def write(self, request: CoderRequest) -> CoderAnswer:
        p = 0.3 + 0.4 * (((request.seed * 7919) % 1000) / 1000)
        return CoderAnswer(plan=f"constant {p:.3f}", code=constant_program(round(p, 3)), config={})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--early", type=int, default=30, help="the first reading, after this many candidates")
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()
    if args.work.exists():
        shutil.rmtree(args.work)
    task = build_demo_task(args.work / "task")
    proc = psutil.Process()
    samples: list[dict] = []
    t0 = time.monotonic()

    def sample(search, node) -> None:
        done = sum(1 for n in search.nodes() if n.state.is_finished())
        if done in (args.early, args.nodes) or done % 50 == 0:
            gc.collect()
            mem = proc.memory_full_info()
            if not samples or samples[-1]["candidates"] != done:
                samples.append({"candidates": done, "rss_mb": mem.rss / 2**20, "uss_mb": mem.uss / 2**20, "t_s": time.monotonic() - t0})
                print(f"{done:4d} candidates: RSS {mem.rss / 2**20:7.1f} MiB, USS {mem.uss / 2**20:7.1f} MiB, {time.monotonic() - t0:6.0f} s", flush=True)

    settings = SearchSettings(
        time_budget_s=24 * 3600, max_nodes=args.nodes, plan_candidates=0, cpu_threads=1, coder="recipe", ensemble=True,
    )
    search = create_search(task, args.work / "run", settings=settings, coder=ConstantCoder(), callbacks=[sample])
    search.run()
    wall = time.monotonic() - t0
    early = next(s for s in samples if s["candidates"] >= args.early)
    late = samples[-1]
    ratio_rss = late["rss_mb"] / early["rss_mb"]
    ratio_uss = late["uss_mb"] / early["uss_mb"]
    print(f"after {early['candidates']}: RSS {early['rss_mb']:.1f} MiB; after {late['candidates']}: RSS {late['rss_mb']:.1f} MiB "
          f"(x{ratio_rss:.3f}); USS x{ratio_uss:.3f}; target <= 1.10")
    if args.report:
        lines = [
            f"# Engine memory over a long run ({dt.datetime.now().isoformat(timespec='seconds')})",
            "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores. Python {platform.python_version()}. Wall time {wall:.0f} s.",
            f"Command: `.venv/bin/python experiments/engine_memory.py --work {args.work} --nodes {args.nodes} --report {args.report}`",
            "",
            "Resident memory of the engine process (not the candidates) after a full garbage collection, sampled in the node callback.",
            "Candidates are constant-prediction programs (see the script); selection, storage, scoring, ensembles and the sandbox are real.",
            "",
            "| candidates finished | RSS (MiB) | USS (MiB) | elapsed (s) |",
            "|---|---|---|---|",
            *[f"| {s['candidates']} | {s['rss_mb']:.1f} | {s['uss_mb']:.1f} | {s['t_s']:.0f} |" for s in samples],
            "",
            f"**After {late['candidates']} vs after {early['candidates']}: RSS x{ratio_rss:.3f}, USS x{ratio_uss:.3f}** (target: at most x1.10).",
            "",
        ]
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines))
    return 0 if ratio_rss <= 1.10 else 1


if __name__ == "__main__":
    sys.exit(main())
