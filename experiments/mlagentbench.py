"""MLAgentBench-style improvement on house prices: does the search improve a starter program?

The starter is ``experiments/baselines/lightgbm_default.py`` (LightGBM defaults on the raw
columns). ``mcgs run --baseline`` runs it as the first node and searches from it; both the
baseline's and the final submission are graded on a fixed 10 % holdout of house-prices'
train.csv (``train_test_split(test_size=0.1, random_state=0)``, as in ``ablation.py``). A run is
a success when the final score improves on the baseline's by at least 10 % in the metric's
direction (MLAgentBench, Huang et al., ICML 2024, §2.3: ``(base - final) / |base| >= 0.1`` for
a lower-is-better metric).

Usage (from the repository root, after ``make install``)::

    .venv/bin/python experiments/mlagentbench.py --work /tmp/mcgs-mlab --seeds 0 1 2 \\
        --time-budget 5m --report docs/results/mlagentbench_house_prices.md

Resumable: finished runs are graded again, not searched again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ablation import HOUSE, grade, prepare_house_prices, run_status  # noqa: E402

from mcgs.search import open_search  # noqa: E402
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)

BASELINE = Path(__file__).resolve().parent / "baselines" / "lightgbm_default.py"


def improvement(base: float, final: float, lower_is_better: bool) -> float:
    """Relative improvement of ``final`` over ``base`` in the metric's direction."""
    return (base - final) / abs(base) if lower_is_better else (final - base) / abs(base)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-budget", default="5m")
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()
    data = args.work / "data"
    task = prepare_house_prices(args.shared / HOUSE / "raw", data / HOUSE)
    rows = []
    for seed in args.seeds:
        run = args.work / "runs" / f"seed{seed}"
        if run_status(run) != "finished":
            cmd = [sys.executable, "-m", "mcgs", "resume", str(run)] if run_status(run) else [
                sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run), "--time-budget", args.time_budget,
                "--seed", str(seed), "--baseline", str(BASELINE), "--coder", "recipe"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                print(r.stdout[-2000:], r.stderr[-2000:])
        search = open_search(run)
        base_node = next(n for n in search.nodes() if n.config.get("baseline"))
        base = grade(HOUSE, search.node_dir(base_node) / "submission" / "submission.csv", data)
        final = grade(HOUSE, run / "best" / "submission.csv", data)
        gain = improvement(base, final, True) if base is not None and final is not None else None
        row = {"seed": seed, "baseline_cv": base_node.score, "baseline_holdout": base, "final_cv": search.final_node.score,
               "final_holdout": final, "improvement": None if gain is None else round(gain, 4), "success": gain is not None and gain >= 0.10,
               "nodes": len(search.nodes()) - 1}
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = sum(r["success"] for r in rows)
    out = {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "command": " ".join(sys.argv), "time_budget": args.time_budget, "rows": rows, "successes": ok}
    (args.work / "results.json").write_text(json.dumps(out, indent=2))
    if args.report:
        lines = [f"# MLAgentBench-style improvement on house prices ({out['date']})", "",
                 f"Machine: {out['machine']}. Budget per run: {args.time_budget}. Command: `{out['command']}`", "",
                 "Baseline: `experiments/baselines/lightgbm_default.py` (LightGBM defaults, raw columns), run as the first node with "
                 "`mcgs run --baseline`. Metric RMSLE on a fixed 10 % holdout (lower is better); success = improvement >= 10 %.", "",
                 "| seed | baseline CV | baseline holdout | final CV | final holdout | improvement | success | nodes |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            gain = "-" if r["improvement"] is None else f"{100 * r['improvement']:.1f} %"
            lines.append(f"| {r['seed']} | {r['baseline_cv']:.5f} | {r['baseline_holdout']} | {r['final_cv']:.5f} | {r['final_holdout']} | "
                         f"{gain} | {r['success']} | {r['nodes']} |")
        lines += ["", f"Successes: {ok} of {len(rows)} runs."]
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
