"""Do low fidelities rank configs as full fidelity does? (issue 33 §2: the successive-halving rungs)

On each public-suite task large enough for halving (``mcgs.fidelity.rungs`` with the default
settings gives it a rung below full), K LightGBM configs are drawn the way the recipe coder's
Improve moves them (2-3 parameter moves from the default, each a knowledge-base range move), run
by the sandbox at every rung and at full fidelity (:func:`mcgs.fidelity.build_fidelity_task`: the
task's own fold scheme at every rung), and scored by the engine. The table gives, per task and rung, Spearman's rank
correlation of the rung's scores with the full-fidelity scores, and whether the full-fidelity
best config is in the rung's top 1/eta (what promotion needs).

Usage (from the repository root; the suite built by ``experiments/suite.py --out SUITE``)::

    .venv/bin/python experiments/fidelity_rank.py --suite SUITE --configs 8 --report docs/results/fidelity.md
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path


def configs_for(profile: dict, k: int, seed: int) -> list[dict]:
    """The default LightGBM config and k - 1 others, each 2-3 Improve-style parameter moves away."""
    from mcgs.coders.recipe_config import default_config, mutate_params
    from mcgs.knowledge_base import get_entry

    entry = get_entry("model.lightgbm")
    rng = random.Random(seed)
    base = default_config(entry.id, profile)
    out = [base]
    while len(out) < k:
        c = base
        for _ in range(rng.choice((2, 3))):
            c, _ = mutate_params(c, entry, rng, avoid=())
        out.append(c)
    return out


def measure(task_dir: Path, work: Path, k: int, seed: int, say) -> list[dict]:
    """Scores of k configs at every fidelity of the task: rows ``{fidelity, config, score, runtime_s}``."""
    from mcgs.coders import CoderAnswer
    from mcgs.coders.recipe_config import render_program
    from mcgs.fidelity import build_fidelity_task, fidelity_label, rungs
    from mcgs.profile import profile_task
    from mcgs.screening import run_screen
    from mcgs.settings import SearchSettings
    from mcgs.task import load_task

    spec = load_task(task_dir)
    profile = profile_task(spec)
    levels = rungs(spec.n_train, SearchSettings())
    answers = []
    for i, c in enumerate(configs_for(profile, k, seed)):
        code, ids = render_program(c, title=f"config {i}", plan="", profile=profile)
        answers.append(CoderAnswer(plan=f"config {i}", code=code, config=c, knowledge_ids=ids))
    rows = []
    for f in levels:
        folder = work / spec.name / fidelity_label(f)
        sub = build_fidelity_task(spec, folder / "task", f, seed)  # the rung as the search builds it (all rows at f = 1)
        t0 = time.monotonic()
        results = run_screen(answers, sub, folder, timeout_s=900, time_share_s=1e9, threads=2, memory_mb=8192)
        say(f"{spec.name} fidelity {fidelity_label(f)} ({sub.n_train} rows): {[r.state for r in results]} in {time.monotonic() - t0:.0f}s")
        rows += [{"task": spec.name, "fidelity": f, "config": i, "score": r.score, "runtime_s": r.runtime_s, "state": r.state}
                 for i, r in enumerate(results)]
    return rows


def report(rows: list[dict], eta: int) -> list[str]:
    from scipy.stats import spearmanr

    from mcgs.fidelity import fidelity_label

    lines = ["| task | fidelity | configs | Spearman with full | full-fidelity best in the rung's top 1/eta | run time vs full |", "|---|---|---|---|---|---|"]
    for task in sorted({r["task"] for r in rows}):
        mine = [r for r in rows if r["task"] == task]
        full = {r["config"]: r for r in mine if r["fidelity"] >= 1 and r["score"] is not None}
        hib = mine[0].get("higher_is_better", True)
        best_full = (max if hib else min)(full, key=lambda c: full[c]["score"])
        for f in sorted({r["fidelity"] for r in mine if r["fidelity"] < 1}, reverse=True):
            low = {r["config"]: r for r in mine if r["fidelity"] == f and r["score"] is not None}
            common = sorted(set(low) & set(full))
            rho = spearmanr([low[c]["score"] for c in common], [full[c]["score"] for c in common]).statistic
            top = sorted(low, key=lambda c: low[c]["score"], reverse=hib)[: max(1, len(low) // eta)]
            ratio = sum(low[c]["runtime_s"] for c in common) / sum(full[c]["runtime_s"] for c in common)
            lines.append(f"| {task} | {fidelity_label(f)} | {len(common)} | {rho:.2f} | {'yes' if best_full in top else 'no'} | {ratio:.2f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    from mcgs.settings import SearchSettings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", type=Path, required=True)
    ap.add_argument("--tasks", default="", help="comma-separated; default every task with a rung below full (the memory task aside)")
    ap.add_argument("--configs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mcgs_fidelity_rank"))
    ap.add_argument("--report", type=Path)
    a = ap.parse_args(argv)
    from mcgs.fidelity import rungs
    from mcgs.task import load_task

    suite = json.loads((a.suite / "suite.json").read_text())["tasks"]
    names = [n for n in a.tasks.split(",") if n] or [t["name"] for t in suite if not t.get("memory_check")
                                                     and len(rungs(t["train_rows"], SearchSettings())) > 1]
    rows = []
    for name in names:
        spec = load_task(a.suite / "tasks" / name)
        got = measure(a.suite / "tasks" / name, a.work, a.configs, a.seed, say=lambda m: print(m, flush=True))
        rows += [{**r, "higher_is_better": spec.higher_is_better} for r in got]
        (a.work / "rows.json").write_text(json.dumps(rows, indent=1))
    s = SearchSettings()
    page = "\n".join(["# Do the halving rungs rank configs as full fidelity does?", "",
                      f"{a.configs} LightGBM configs per task (the default and Improve-style moves from it), eta = {s.halving_eta}, "
                      f"halving_min_rows = {s.halving_min_rows}; 2 threads.", "", *report(rows, s.halving_eta), "",
                      f"Command: `python experiments/fidelity_rank.py --suite SUITE --configs {a.configs}"
                      f"{' --tasks ' + a.tasks if a.tasks else ''} --report {a.report}`"]) + "\n"
    print(page)
    if a.report:
        a.report.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
