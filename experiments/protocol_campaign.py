"""Search each protocol data set (``mcgs protocol``: cora, citeseer, etth1-96, weather-96, ...) with
several seeds and grade the submissions on the protocol's test rows (issue 35's acceptance: 10
minutes, 2 cores, offline, seeds 0-2, median). A forecasting protocol's submission is the run's
``best/test_forecast.npy`` (the engine's forecast-mode windows); its table adds MAE and the
look-back the chosen node asked for.

Each (data set, seed) is ``mcgs run TASK --out RUN --time-budget B --seed S`` then
``mcgs protocol grade``; a finished pair's result (``results/<name>-seed<S>.json``) is kept, so
a stopped campaign resumes where it stopped. The table goes to ``README.md`` in the output
folder, with the command, below the text of ``NOTES.md`` there when it exists (what was run and
what it shows, written by hand).

Usage (from the repository root)::

    .venv/bin/python experiments/protocol_campaign.py --data ../shared/data --names cora,citeseer \\
        --seeds 0,1,2 --time-budget 10m --out docs/results/graphs_10min
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def _run_one(name: str, seed: int, args, work: Path) -> dict:
    from mcgs.protocols import get_protocol, grade_protocol, prepare_protocol

    proto = get_protocol(name)
    prepared = work / "prepared" / name
    task = prepare_protocol(name, args.data / proto.raw_folder / "raw", prepared)
    run_dir = work / "runs" / f"{name}-seed{seed}"
    if run_dir.exists():  # a stopped run: resume it
        cmd = [sys.executable, "-m", "mcgs", "resume", str(run_dir)]
    else:
        cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run_dir), "--time-budget", args.time_budget,
               "--seed", str(seed), "--cpu-threads", str(args.threads)]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (work / "runs" / f"{name}-seed{seed}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    forecast = proto.answers.endswith(".npz")
    sub = run_dir / "best" / ("test_forecast.npy" if forecast else "submission.csv")
    score = grade_protocol(name, sub, prepared / proto.answers) if sub.is_file() else None
    extra = {}
    if isinstance(score, dict):  # a forecast: MSE is the score, MAE and the look-back beside it
        extra = {"mae": score["mae"], "lookback": json.loads((run_dir / "best" / "test_score.json").read_text()).get("lookback")}
        score = score["mse"]
    import mcgs

    run = mcgs.load_run(run_dir)
    chosen = run.chosen_node
    return {"name": name, "seed": seed, "score": score, **extra, "metric": proto.metric, "exit_code": proc.returncode,
            "wall_s": round(time.time() - t0, 1), "nodes": len(run.nodes) - 1, "valid_nodes": sum(n.is_valid for n in run.nodes),
            "chosen": None if chosen is None else {"node": chosen.seq, "operator": chosen.operator.value, "model": chosen.config.get("model"),
                                                   "validation_score": chosen.score}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True, help="folder holding <name>/raw (../shared/data)")
    ap.add_argument("--names", default="cora,citeseer")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--time-budget", default="10m")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, help="where prepared data and runs go (default: OUT/work)")
    args = ap.parse_args(argv)
    work = args.work or args.out / "work"
    (args.out / "results").mkdir(parents=True, exist_ok=True)
    (work / "runs").mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.names.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            path = args.out / "results" / f"{name}-seed{seed}.json"
            if not path.is_file():
                print(f"{name} seed {seed}: searching for {args.time_budget}", flush=True)
                path.write_text(json.dumps(_run_one(name, seed, args, work), indent=2))
            rows.append(json.loads(path.read_text()))
            print(f"{name} seed {seed}: {rows[-1]['score']}", flush=True)
    lines = [f"# Protocol campaign ({dt.date.today().isoformat()})", "",
             "Command: `" + " ".join(["python", "experiments/protocol_campaign.py", *(argv if argv is not None else sys.argv[1:])]) + "`", "",
             "| data set | seed | test score | test MAE (forecasts) | look-back | validation score (chosen node) | chosen | nodes (valid) | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["chosen"] or {}
        val = f"{c['validation_score']:.4f}" if c.get("validation_score") is not None else "-"
        score = f"{r['score']:.4f}" if r["score"] is not None else "none"
        mae = f"{r['mae']:.4f}" if r.get("mae") is not None else "-"
        lines.append(f"| {r['name']} | {r['seed']} | {score} | {mae} | {r.get('lookback') or '-'} | {val} | {c.get('operator', '-')} "
                     f"{c.get('model') or ''} | {r['nodes']} ({r['valid_nodes']}) | {r['wall_s']} |")
    lines += ["", "| data set | median test score | seeds |", "|---|---|---|"]
    for name in args.names.split(","):
        scores = [r["score"] for r in rows if r["name"] == name and r["score"] is not None]
        if scores:
            lines.append(f"| {name} | {statistics.median(scores):.4f} | {len(scores)} |")
    notes = args.out / "NOTES.md"  # what was run and what it shows, written by hand: kept above the table
    head = notes.read_text().rstrip() + "\n\n" if notes.is_file() else ""
    (args.out / "README.md").write_text(head + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
