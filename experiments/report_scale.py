"""The read-only views of a large run: `mcgs status` time and `mcgs report` size at 5 000 nodes.

Builds a run of ``--nodes`` nodes in real storage, as a long search leaves it: the bundled demo
task, plans of about 500 characters (an LLM's), programs of about 16 KB (the recipe coder's, each with its own parameters), stdout and
stderr tails of 4 000 characters, tracebacks on the failed nodes (15 %), and each valid node's
workspace with its predictions and submission. Then, in one run of this script:

1. ``mcgs status RUN`` as a user runs it (a fresh process: start-up, imports, opening the
   storage read-only, the view), wall time, best of ``--repeats``. Target: under 2 s.
2. ``mcgs report RUN`` (fresh process): its wall time and the file's size, against the same
   report with every node's program, diff and logs embedded (what it did before the report
   embedded them for the nodes a reader looks at only), rendered in this process. Target:
   under 10 MiB.

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/report_scale.py --work /tmp/mcgs-scale --nodes 5000 --report docs/results/report_scale.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mcgs.coders import CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.node import NodeState, Operator
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def build_run(work: Path, n_nodes: int, seed: int = 0) -> Path:
    """A finished run of ``n_nodes`` synthetic nodes under ``work/run``; returns its folder."""
    rng = random.Random(seed)
    task = build_demo_task(work / "task")
    run_dir = work / "run"
    search = create_search(task, run_dir, settings=SearchSettings(time_budget_s=36000, coder="recipe", ensemble=False))
    coder = RecipeCoder(models=("model.lightgbm",))
    code = coder.write(CoderRequest(operator=Operator.DRAFT, task=search.task, profile=search.profile)).code
    folds = pd.read_csv(search.input_dir / "folds.csv")
    rows = folds.loc[folds["fold"] >= 0, "row"].to_numpy()
    col = search.task.prediction_columns[0]
    sample = pd.read_csv(search.task.sample_submission_path)
    tail = ("fold 0 done\n" + "[LightGBM] [Info] Number of positive: 212, number of negative: 357\n" * 70)[-4000:]
    traceback = ('Traceback (most recent call last):\n  File "solution.py", line 212, in <module>\n'
                 + '  File "/usr/lib/python3/site-packages/lightgbm/basic.py", line 1210, in fit\n' * 12
                 + "ValueError: Input contains NaN\n")
    # an LLM's plan is a paragraph: about 500 characters
    plan_text = ("Keep the LightGBM model and its five folds, but lower the learning rate and raise the number of rounds with "
                 "early stopping on each fold's validation part, add the ratio of the two strongest numeric columns as a feature, "
                 "and encode the categorical columns by their out-of-fold target mean so that no fold sees its own labels; the "
                 "parent overfit after round 300, so this should gain a little on the validation folds without costing time.")
    ids = [next(n.id for n in search.nodes() if n.parent_id is None)]
    t0 = time.monotonic()
    for i in range(1, n_nodes + 1):
        parent = ids[0] if i <= 5 else ids[rng.randint(1, len(ids) - 1)]
        ok = rng.random() < 0.85
        op = Operator.DRAFT if parent == ids[0] else (Operator.IMPROVE if ok else Operator.DEBUG)
        program = code + f"\n# variant {i}: num_leaves={rng.randint(8, 256)} learning_rate={rng.uniform(0.01, 0.3):.4f}\n"
        node = search.storage.add_node(search.run_id, parent_id=parent, operator=op, plan=f"[{op.value}] change num_leaves and the learning rate ({i}). " + plan_text,
                                       code=program, config={"model": "model.lightgbm", "variant": i}, owner=search.owner)
        ids.append(node.id)
        score = 0.95 + 0.04 * rng.random() if ok else None
        if ok:  # the artifacts a valid node leaves, as the engine reads them back
            ws = run_dir / "nodes" / f"{node.seq:05d}"
            (ws / "working").mkdir(parents=True)
            (ws / "submission").mkdir()
            p = np.clip(rng.random() * 0.2 + 0.4, 0, 1)
            pd.DataFrame({"row": rows, col: p}).to_csv(ws / "working" / "oof.csv", index=False)
            pd.DataFrame({"row": range(len(sample)), col: p}).to_csv(ws / "working" / "test_pred.csv", index=False)
            sample.assign(**{col: p}).to_csv(ws / "submission" / "submission.csv", index=False)
        search.storage.set_running(node.id, f"nodes/{node.seq:05d}")
        search.storage.finish_node(node.id, state=NodeState.VALID if ok else NodeState.BUGGY, score=score, reward=score if ok else -1.0,
                                   error=None if ok else "ValueError: Input contains NaN\n" + traceback, stdout_tail=tail,
                                   stderr_tail=tail if ok else traceback, runtime_s=rng.uniform(2, 60))
        if i % 1000 == 0:
            print(f"  {i} nodes stored ({time.monotonic() - t0:.0f} s)", flush=True)
    # the run's choice, stored as the engine stores it after every verdict (no final ensemble here)
    chosen = max((n for n in search.storage.get_node_summaries(search.run_id) if n.is_valid), key=lambda n: (n.score, -n.seq))
    search.storage.update_run(search.run_id, status="finished", elapsed_s=36000 * 0.99, best_node_id=chosen.id)
    search.storage.close()
    return run_dir


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True, help="Scratch folder (replaced).")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--report", type=Path, help="Markdown file to write the results to.")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    print(f"building a run of {args.nodes} nodes in {args.work}")
    t0 = time.monotonic()
    run_dir = build_run(args.work, args.nodes)
    build_s = time.monotonic() - t0
    mcgs = [sys.executable, "-m", "mcgs"]
    status = []
    for _ in range(args.repeats):
        s, res = timed([*mcgs, "status", str(run_dir)])
        assert res.returncode == 0, res.stderr[-2000:]
        status.append(s)
    report_path = args.work / "report.html"
    report_s, res = timed([*mcgs, "report", str(run_dir), "-o", str(report_path)])
    assert res.returncode == 0, res.stderr[-2000:]
    size = report_path.stat().st_size

    import mcgs.report as report
    from mcgs.search import open_search

    report.FULL_DETAIL_NODES = 10**9  # every node's program, diff and logs, as before
    t0 = time.perf_counter()
    everything = len(report.render_report(open_search(run_dir, read_only=True)).encode())
    full_s = time.perf_counter() - t0

    lines = [
        f"# Status time and report size of a {args.nodes}-node run",
        "",
        f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} ({os.cpu_count()} cores), one run of:",
        "",
        "```",
        f".venv/bin/python experiments/report_scale.py --work {args.work} --nodes {args.nodes} --repeats {args.repeats}"
        + (f" --report {args.report}" if args.report else ""),
        "```",
        "",
        f"The run ({args.nodes} nodes, programs of {len(open_search(run_dir, read_only=True).nodes()[1].code) / 1024:.1f} KB, 4 000-character "
        f"log tails, 15 % failed with tracebacks, every valid node's workspace) took {build_s:.0f} s to build.",
        "",
        "| what | figure | target |",
        "|---|---|---|",
        f"| `mcgs status RUN`, fresh process, best of {args.repeats} | {min(status):.2f} s (all: {', '.join(f'{s:.2f}' for s in status)}) | under 2 s |",
        f"| `mcgs report RUN`, fresh process | {report_s:.1f} s | |",
        f"| report size | {size / 2**20:.2f} MiB | under 10 MiB |",
        f"| the same report embedding every node's program, diff and logs (as before) | {everything / 2**20:.1f} MiB, rendered in {full_s:.1f} s | |",
        f"| ratio | {everything / size:.1f}x smaller | |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.report:
        args.report.write_text(text)


if __name__ == "__main__":
    main()
