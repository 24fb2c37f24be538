"""The cost model's prediction error on finished runs, per model family (issue 33 §1).

Each run is replayed in node order: every node with a recipe config and a run time (valid, or
failed after running) is predicted at its fidelity by :class:`mcgs.cost_model.CostModel` calibrated on the nodes
before it, then observed. The table gives, per model, the median ``|log(predicted / actual)|``
of the prior alone and of the calibrated prediction (0 = exact; 0.69 = off by a factor of 2),
over every run given.

Each argument is a run folder, or a JSON file of such rows that ``mcgs bench`` keeps for every
mcgs pair (``BENCH_DIR/cost_model/<task>-seed<seed>.json``: the run folders themselves are not
kept in the repository, these rows are).

Usage (from the repository root)::

    .venv/bin/python experiments/cost_model.py BENCH_DIR/runs/*/mcgs/run --report docs/results/cost_model.md
    .venv/bin/python experiments/cost_model.py docs/results/suite_bench_10min/cost_model/*.json --report docs/results/cost_model.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _inputs(paths: list[Path]) -> str:
    """The inputs as a command line shows them: JSON row files by their folder's glob."""
    folders = sorted({str(p.parent) for p in paths if p.is_file()})
    runs = [str(p) for p in paths if not p.is_file()]
    return " ".join([*(f"{f}/*.json" for f in folders), *(runs if len(runs) <= 3 else ["RUN_DIRS"])])


def main(argv: list[str] | None = None) -> int:
    from mcgs.cost_model import prediction_error, replay_run

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="Run folders, or JSON files of replayed rows (mcgs bench's cost_model/).")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    rows = [r for run in args.runs for r in (json.loads(run.read_text()) if run.is_file() else replay_run(run))]
    by_model: dict[str, list[dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    lines = ["| model | nodes | median error of the prior | median error calibrated on the run |", "|---|---|---|---|"]
    for name, rs in sorted(by_model.items()) + [("all", rows)]:
        prior = prediction_error((r["prior"], r["actual"]) for r in rs)
        calibrated = prediction_error((r["predicted"], r["actual"]) for r in rs)
        lines.append(f"| {name} | {len(rs)} | {prior:.2f} | {calibrated:.2f} |")
    page = "\n".join(["# Cost model: prediction error per model", "",
                      f"{len(rows)} nodes of {len(args.runs)} runs; error = median |log(predicted / actual)| (0.69 = a factor of 2).", "",
                      *lines, "", f"Command: `python experiments/cost_model.py {_inputs(args.runs)}{' --report ' + str(args.report) if args.report else ''}`"]) + "\n"
    print(page)
    if args.report:
        args.report.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
