"""Leave-one-task-out on the public suite: does the experience store make a search start where the
earlier ones ended (issue 39)?

Two passes over the suite's tasks (``experiments/suite.py``), each run ``mcgs run TASK`` with the
same budget and seed:

1. **Without a store**: each task's run writes its experience into a store of its own
   (``WORK/stores/<task>.db``; the run starts from nothing, as that store is empty).
2. **Leave one out**: for each task, a store holding the pass-1 experience of every *other*
   task (``WORK/loto/<task>.db``), and the task run again from it.

Per task: the time the pass-2 run took to reach the pass-1 run's final validation score (the
best full-fidelity valid node's engine score; seconds from the run's first node's creation to
the finish of the first node at least as good), the
time pass 1 took to reach it, and both runs' held-out test scores (the answers the suite keeps
outside the task folder). The acceptance of issue 39: the time ratio is at most 0.5 on >= 70 %
of the tasks, and the held-out score is not worse on >= 90 % (worse: by more than 0.1 % of the
score, relative, the noise between two seeds of one search measured in docs/results/suite_bench_10min).

Usage (from the repository root, after ``pip install -e ".[suite]"``; hours at 10 minutes a run)::

    .venv/bin/python experiments/suite.py --out /tmp/mcgs-suite
    .venv/bin/python experiments/experience_loto.py --suite /tmp/mcgs-suite --work /tmp/mcgs-loto \\
        --time-budget 10m --report docs/results/experience_loto.md

A rerun skips the runs whose ``result.json`` exists, so a pass spread over sittings resumes.
Pass 1 is what ``mcgs bench --suite ... --competitors mcgs`` runs at the same budget and seed (the
bench runs with the store off): ``--base-runs BENCH_OUT`` takes its finished mcgs runs instead of
running them again (each added to its task's store as ``mcgs experience add`` adds it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

#: A held-out score worse than the no-store run's by more than this share counts as worse.
WORSE_SHARE = 0.001


def run_task(suite: Path, name: str, run_dir: Path, store: Path, budget: str, seed: int) -> dict:
    """Run mcgs on one suite task with ``store`` as its experience store; grade it; cached in
    ``run_dir/result.json``."""
    out = run_dir / "result.json"
    if out.is_file():
        return json.loads(out.read_text())
    if run_dir.exists():
        subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    env = {**os.environ, "MCGS_EXPERIENCE_STORE": str(store)}
    cmd = [sys.executable, "-m", "mcgs", "run", str(suite / "tasks" / name), "--out", str(run_dir), "--time-budget", budget, "--seed", str(seed)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return result_of(suite, name, run_dir, out, proc.returncode)


def reuse_base_run(suite: Path, name: str, found: Path, work: Path, budget: str, seed: int) -> dict | None:
    """Pass 1 from a finished no-store run made elsewhere (``mcgs bench --suite``'s
    ``OUT/runs/<task>/mcgs/run``, which runs with the store off) with the same budget and seed:
    its experience goes into ``work/stores/<task>.db`` (what ``mcgs experience add`` stores) and its result
    into ``work/base/<task>/result.json``; None when there is no such run."""
    from mcgs.experience import ExperienceStore, contribution, store_url
    from mcgs.node import RunStatus
    from mcgs.search import open_search
    from mcgs.settings import parse_duration

    out = work / "base" / name / "result.json"
    if out.is_file():
        return json.loads(out.read_text())
    if not (found / "mcgs.db").is_file():
        return None
    search = open_search(found, read_only=True)
    settings = search.settings
    recalled = json.loads((found / "experience.json").read_text())["experience"]["runs"] if (found / "experience.json").is_file() else []
    if (search.run_record.status is not RunStatus.FINISHED or settings.seed != seed or abs(settings.time_budget_s - parse_duration(budget)) > 1
            or recalled):
        print(f"not reusing {found}: {search.run_record.status.value}, seed {settings.seed}, budget {settings.time_budget_s:.0f} s, "
              f"{len(recalled)} experience run(s) used", flush=True)
        return None
    store = work / "stores" / f"{name}.db"
    store.unlink(missing_ok=True)
    ExperienceStore(store_url(str(store))).add_run(*contribution(search))  # as `mcgs experience add` does
    out.parent.mkdir(parents=True, exist_ok=True)
    return result_of(suite, name, found, out, 0)


def result_of(suite: Path, name: str, run_dir: Path, out: Path, returncode: int) -> dict:
    """A finished run's best-so-far curve (full-fidelity valid nodes), final validation score and
    held-out score, written to ``out``."""
    from mcgs.mlebench.bench import grade_suite_submission
    from mcgs.snapshot import load_run

    snap = load_run(run_dir)
    nodes = [n for n in snap.search_nodes if n.is_valid and n.full_fidelity and n.finished_at]
    start = min((n.created_at for n in snap.search_nodes if n.created_at), default=None)
    curve = sorted(((n.finished_at - start).total_seconds(), n.score) for n in nodes) if start else []
    result = {"task": name, "returncode": returncode, "run_dir": str(run_dir), "higher_is_better": snap.task.higher_is_better, "curve": curve,
              "final_cv": snap.chosen_node.score if snap.chosen_node else None,
              "test": grade_suite_submission(suite, name, run_dir / "best" / "submission.csv")["score"],
              "experience_runs": len(json.loads((run_dir / "experience.json").read_text())["experience"]["runs"])
              if (run_dir / "experience.json").is_file() else 0}
    out.write_text(json.dumps(result))
    return result


def time_to_reach(curve: list, target: float, higher_is_better: bool) -> float | None:
    """Seconds until the best score so far is at least as good as ``target``; None if never."""
    for t, score in curve:
        if (score >= target) if higher_is_better else (score <= target):
            return t
    return None


def merged_store(stores: list[Path], dest: Path) -> Path:
    """A store holding every run of ``stores`` (rebuilt each time)."""
    from mcgs.experience import ExperienceStore, store_url

    if dest.exists():
        dest.unlink()
    out = ExperienceStore(store_url(str(dest)))
    for path in stores:
        src = ExperienceStore(store_url(str(path)))
        for run in src.runs():
            nodes = src.nodes([run["id"]])
            row = {k: run[k] for k in ("source", "fingerprint", "task_kind", "modality", "metric", "n_nodes", "created_at")}
            row["features_json"] = json.dumps(run["features"])
            out.add_run(row, [{"model": n["model"], "operator": n["operator"], "config_json": json.dumps(n["config"]),
                               "knowledge_json": json.dumps(n["knowledge_ids"]), "state": n["state"], "rank": n["rank"],
                               "runtime_s": n["runtime_s"], "cost_offset": n["cost_offset"], "leads_to_best": n["leads_to_best"]}
                              for n in nodes])
    return dest


def compare(base: dict, loto: dict) -> dict:
    """One task's row: times to the no-store final score, their ratio, held-out scores."""
    hib = base["higher_is_better"]
    target = base["final_cv"]
    t_base = time_to_reach(base["curve"], target, hib) if target is not None else None
    t_loto = time_to_reach(loto["curve"], target, hib) if target is not None else None
    ratio = None if t_base in (None, 0) or t_loto is None else t_loto / t_base
    worse = None
    if base["test"] is not None and loto["test"] is not None:
        gap = (base["test"] - loto["test"]) if hib else (loto["test"] - base["test"])
        worse = gap > WORSE_SHARE * abs(base["test"])
    return {"task": base["task"], "t_base": t_base, "t_loto": t_loto, "ratio": ratio, "test_base": base["test"], "test_loto": loto["test"],
            "worse": worse, "experience_runs": loto["experience_runs"]}


def report(rows: list[dict], args) -> str:
    fast = sum(r["ratio"] is not None and r["ratio"] <= 0.5 for r in rows)
    kept = sum(r["worse"] is False for r in rows)
    lines = [f"# Experience store, leave one task out ({dt.date.today()})", "",
             f"Command: `{' '.join(sys.argv)}`", "",
             f"Time to reach the no-store run's final validation score at most half: **{fast}/{len(rows)}** (asks >= 70 %); "
             f"held-out score not worse (by more than {WORSE_SHARE:.1%}): **{kept}/{len(rows)}** (asks >= 90 %).", "",
             "| task | experience runs used | s to no-store final, no store | with store | ratio | test, no store | test, with store | worse |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fmt = lambda v: "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))  # noqa: E731
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['task']} | {r['experience_runs']} | {fmt(r['t_base'])} | {fmt(r['t_loto'])} | {ratio} | "
                     f"{r['test_base']} | {r['test_loto']} | {r['worse']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--time-budget", default="10m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", help="comma-separated task names (default: every task of the suite)")
    ap.add_argument("--report", type=Path)
    ap.add_argument("--base-runs", type=Path,
                    help="a `mcgs bench --suite` output folder whose finished mcgs runs (same budget and seed) serve as pass 1")
    args = ap.parse_args()
    built = json.loads((args.suite / "suite.json").read_text())
    names = [t["name"] for t in built["tasks"] if not t.get("memory_check")]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    (args.work / "stores").mkdir(parents=True, exist_ok=True)
    (args.work / "loto").mkdir(parents=True, exist_ok=True)
    base = {}
    for name in names:  # pass 1: no experience in, each run's own store out
        reused = reuse_base_run(args.suite, name, args.base_runs / "runs" / name / "mcgs" / "run", args.work, args.time_budget, args.seed) \
            if args.base_runs else None
        base[name] = reused or run_task(args.suite, name, args.work / "base" / name, args.work / "stores" / f"{name}.db", args.time_budget, args.seed)
        print(f"no store: {name}: cv {base[name]['final_cv']}, test {base[name]['test']}", flush=True)
    rows = []
    for name in names:  # pass 2: the other tasks' experience
        others = [args.work / "stores" / f"{n}.db" for n in names if n != name and (args.work / "stores" / f"{n}.db").is_file()]
        result_file = args.work / "with" / name / "result.json"
        store = args.work / "loto" / f"{name}.db"
        if not result_file.is_file():
            merged_store(others, store)
        loto = run_task(args.suite, name, args.work / "with" / name, store, args.time_budget, args.seed)
        rows.append(compare(base[name], loto))
        print(json.dumps(rows[-1]), flush=True)
    text = report(rows, args)
    print(text)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
