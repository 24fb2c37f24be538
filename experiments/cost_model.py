"""The cost model's prediction error on finished runs, per model family (issue 33 §1).

Each run is replayed in node order: every node with a recipe config and a run time (valid, or
failed after running) is predicted at its fidelity by :class:`mcgs.cost_model.CostModel` calibrated on the nodes
before it, then observed. The table gives, per model, the median ``|log(predicted / actual)|``
of the prior alone and of the calibrated prediction (0 = exact; 0.69 = off by a factor of 2),
over every run given.

Usage (from the repository root)::

    .venv/bin/python experiments/cost_model.py BENCH_DIR/runs/*/mcgs/run --report docs/results/cost_model.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def replay(run_dir: Path) -> list[dict]:
    """One row per predictable node of a run: model, prior, calibrated prediction, actual."""
    from mcgs.cost_model import CostModel
    from mcgs.snapshot import load_run

    snap = load_run(run_dir)
    profile = json.loads((run_dir / "profile.json").read_text())
    model = CostModel.for_task(profile, snap.task.validation)
    rows = []
    for node in snap.nodes:
        if not node.config.get("model") or not node.runtime_s or node.state.value not in ("valid", "buggy", "invalid_output"):
            continue
        rows.append({"task": snap.task.name, "model": node.config["model"], "prior": model.prior_s(node.config, node.fidelity),
                     "predicted": model.predict_s(node.config, node.fidelity), "actual": node.runtime_s})
        model.observe(node.config, node.runtime_s, node.fidelity)
    return rows


def main(argv: list[str] | None = None) -> int:
    from mcgs.cost_model import prediction_error

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="Run folders.")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    rows = [r for run in args.runs for r in replay(run)]
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
                      *lines, "", f"Command: `python experiments/cost_model.py RUN_DIRS --report {args.report}`"]) + "\n"
    print(page)
    if args.report:
        args.report.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
