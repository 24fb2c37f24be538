"""The decision trace of a seeded recipe run: what a refactoring must leave unchanged.

Runs ``mcgs run TASK --coder recipe --seed S --max-nodes N --workers 1 --time-budget 10h`` in a
fresh process (the budget is long enough that the clock never reaches the exploit phase, so
selection depends on the seed and the scores alone) and writes one line per node, in creation
order: node number, operator, primary parent's number, state, the recipe coder's config and the
engine's score (``repr`` of the stored float, so two traces match only when every score is the
same bit for bit), plus the run's chosen node.

The trace is read from the run's SQLite file with plain SQL, not through mcgs, so the code under
test does not also produce the evidence.

One input of selection is measured, not seeded: UCT's cost term subtracts each branch's mean
candidate runtime (``cost_penalty_share``, :func:`mcgs.policy.uct_value`), so two runs on a
machine busy in different ways can choose differently where two children are nearly tied.
The draft-plan screening is timed too: a plan that passes its 60 s limit on a busy machine is
ranked among the plans it could not judge, which changes the order of the drafts. Compare traces
made on an idle machine, or pass ``--timing-free`` to every run being compared: it sets
``MCGS_COST_PENALTY_SHARE=0``, ``MCGS_SCREEN_TIMEOUT_S=3600``, ``MCGS_PER_RUN_TIMEOUT_S=3600`` and
``MCGS_TIMEOUT_FACTOR=0`` (no limit from the cost model's prediction) for the run, so the decisions depend on the seed and the scores alone. The last one matters on
spaceship-titanic: a CatBoost node averaging three seeds of 2 000 rounds took about 300 s (the
default per-candidate limit) on a busy machine, so two runs of the same code differed at node 15
(valid in one, timed out in the other) until the limit was lifted.

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/trace.py demo --work /tmp/trace-a --out /tmp/trace-a/demo.txt
    .venv/bin/python experiments/trace.py spaceship-titanic --raw ../shared/data --work /tmp/trace-a --out /tmp/trace-a/spaceship.txt
    diff /tmp/trace-a/demo.txt /tmp/trace-b/demo.txt     # empty when the decisions are the same

``demo`` is the bundled demo task (``mcgs demo``'s data); any other name is an MLE-bench
competition prepared from ``--raw`` (``mcgs mlebench prepare``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def task_folder(name: str, work: Path, raw: Path | None) -> Path:
    """The task folder to search: the demo task built under ``work``, or a prepared competition."""
    if name == "demo":
        from mcgs.demo import build_demo_task

        return build_demo_task(work / "demo-task")
    if raw is None:
        raise SystemExit(f"--raw is needed to prepare {name}")
    data = work / "data"
    if not (data / name / "prepared" / "public").is_dir():
        subprocess.run([sys.executable, "-m", "mcgs", "mlebench", "prepare", name, "--raw", str(raw / name / "raw"), "--out", str(data)], check=True)
    return data / name


def read_trace(run_dir: Path) -> list[str]:
    """One line per node of the run in ``run_dir`` (its ``mcgs.db``), in creation order."""
    db = sqlite3.connect(f"file:{run_dir / 'mcgs.db'}?mode=ro", uri=True)
    rows = db.execute("select id, seq, parent_id, operator, state, config_json, score from nodes order by seq").fetchall()
    seq_of = {r[0]: r[1] for r in rows}
    lines = []
    for _id, seq, parent, op, state, config, score in rows:
        cfg = json.dumps(json.loads(config or "{}"), sort_keys=True)
        lines.append(f"{seq}\t{op}\tparent={seq_of.get(parent)}\t{state}\t{cfg}\tscore={score!r}")
    best = db.execute("select best_node_id from runs").fetchone()[0]
    lines.append(f"chosen node: {seq_of.get(best)}")
    db.close()
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", help="demo, or an MLE-bench competition id (with --raw)")
    ap.add_argument("--work", type=Path, required=True, help="Scratch folder; its run/ is replaced.")
    ap.add_argument("--out", type=Path, required=True, help="Trace file to write.")
    ap.add_argument("--raw", type=Path, help="Folder holding <competition>/raw/ (../shared/data).")
    ap.add_argument("--max-nodes", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timing-free", action="store_true", help="Run with no cost term and no screening or per-candidate timeout that a busy machine could reach (see above).")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    task = task_folder(args.task, args.work.resolve(), args.raw.resolve() if args.raw else None)
    run_dir = args.work / f"run-{args.task}"
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run_dir), "--coder", "recipe", "--seed", str(args.seed),
           "--max-nodes", str(args.max_nodes), "--workers", "1", "--time-budget", "10h"]
    t0 = time.monotonic()
    env = {**os.environ, **({"MCGS_COST_PENALTY_SHARE": "0", "MCGS_SCREEN_TIMEOUT_S": "3600", "MCGS_PER_RUN_TIMEOUT_S": "3600",
                                 "MCGS_TIMEOUT_FACTOR": "0"} if args.timing_free else {})}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    lines = read_trace(run_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{args.task}: {len(lines) - 1} nodes in {time.monotonic() - t0:.0f} s; trace in {args.out}")


if __name__ == "__main__":
    main()
