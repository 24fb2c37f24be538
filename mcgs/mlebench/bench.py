"""``mcgs bench``: mcgs against FLAML, Optuna-tuned LightGBM and LightGBM with defaults, on the
same prepared MLE-bench splits, the same cores and the same wall budget.

Every (competition, competitor) pair runs in its own process, started and timed here: mcgs as
``python -m mcgs run`` on the prepared competition folder (offline recipe coder), the others as
``python -m mcgs.mlebench.competitors`` (:mod:`mcgs.mlebench.competitors` says what each one
does). Each gets the budget and the same thread count; its wall time is measured from launch to
exit, and the overrun (wall time less budget) is reported, since a tool that stops late has
used more than its share. A process still alive at ``budget * 1.5 + 60 s`` is killed (with its
children) and scored as having no submission. The submission each writes is graded on the
private split with :func:`~mcgs.mlebench.grade.grade_submission`.

The report (``bench.md`` / ``bench.json``) is a table of private-split scores, each with its
ratio to the best score of the competition (1 = best; direction-aware: ``score / best`` when
higher is better, ``best / score`` when lower is better), the medals, and the overruns.

Resumable: a pair with a result file is not run again; an mcgs run that stopped part-way is
resumed from its storage, a competitor that stopped is run again from the start.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from mcgs.mlebench.campaign import atomic_write, engine_commit, ensure_prepared, fmt_number, load_or_run, partial_notice
from mcgs.mlebench.competitors import COMPETITORS
from mcgs.mlebench.grade import grade_submission

__all__ = ["BenchSpec", "ALL_COMPETITORS", "run_bench", "combine_seeds", "render_bench_markdown", "bench_command", "grade_suite_submission", "suite_tasks"]

ALL_COMPETITORS = ("mcgs", *COMPETITORS)
KILL_FACTOR, KILL_GRACE_S = 1.5, 60.0


@dataclasses.dataclass(frozen=True)
class BenchSpec:
    """What to compare.

    Attributes:
        competitions: MLE-bench competition ids.
        competitors: Names from :data:`ALL_COMPETITORS`.
        time_budget_s: Wall budget of every competitor on every competition, seconds.
        data_dir: Folder of prepared competitions (``mcgs mlebench prepare --out``).
        out_dir: Where each pair's folder (``runs/<id>/<competitor>/``), result files and the
            report go.
        raw_root: Folder holding ``<id>/raw``, to prepare competitions missing from ``data_dir``.
        seed: Seed given to every competitor.
        threads: Threads (cores) every competitor may use.
        suite_dir: A public suite built by ``experiments/suite.py`` (``tasks/``, ``answers/``,
            ``suite.json``): ``competitions`` are then its task names, each graded against its
            answers with the engine's own validator and metric (no medals).
    """

    competitions: tuple[str, ...]
    competitors: tuple[str, ...] = ALL_COMPETITORS
    time_budget_s: float = 600.0
    data_dir: Path = Path("data")
    out_dir: Path = Path("bench")
    raw_root: Path | None = None
    seed: int = 0
    threads: int = 2
    suite_dir: Path | None = None

    def task_dir(self, comp: str) -> Path:
        """The task folder a competitor is given."""
        return self.suite_dir / "tasks" / comp if self.suite_dir is not None else self.data_dir / comp

    def __post_init__(self) -> None:
        unknown = [c for c in self.competitors if c not in ALL_COMPETITORS]
        if unknown:
            raise ValueError(f"unknown competitor(s) {', '.join(unknown)}; choose from {', '.join(ALL_COMPETITORS)}")
        if self.time_budget_s <= 0:
            raise ValueError("the time budget must be positive")


def bench_command(spec: BenchSpec) -> str:
    """The ``mcgs bench`` command line that reproduces ``spec``."""
    where = f"--suite {spec.suite_dir}" if spec.suite_dir is not None else f"--data {spec.data_dir}"
    cmd = (f"mcgs bench --competitions {','.join(spec.competitions)} --competitors {','.join(spec.competitors)} "
           f"--time-budget {spec.time_budget_s:.0f}s --seed {spec.seed} --threads {spec.threads} {where} --out {spec.out_dir}")
    return cmd + (f" --raw {spec.raw_root}" if spec.raw_root is not None else "")


def suite_tasks(suite_dir: Path, *, memory_check: bool = False) -> tuple[str, ...]:
    """The task names of a built public suite (``suite_dir/suite.json``), in its order; the
    memory-check task only when asked.

    Raises:
        ValueError: ``suite_dir`` holds no built suite (with the command that builds one).
    """
    path = suite_dir / "suite.json"
    if not path.is_file():
        raise ValueError(f"{suite_dir} holds no suite.json; build the suite with: python experiments/suite.py --out {suite_dir}")
    return tuple(t["name"] for t in json.loads(path.read_text())["tasks"] if memory_check or not t.get("memory_check"))


def _stop_tree(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process and its descendants (mcgs records a stop and can resume), then
    SIGKILL whatever is left after ``grace_s``."""
    import psutil

    try:
        parent = psutil.Process(proc.pid)
        family = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)


def _command(spec: BenchSpec, comp: str, competitor: str, folder: Path) -> tuple[list[str], Path, float]:
    """The process to start for one pair, the submission it leaves, and the seconds of its
    budget already spent (an mcgs run that stopped part-way resumes)."""
    # absolute: each process runs in its own folder, where tools drop their scratch files
    # (FLAML's CatBoost writes catboost_<time>/ into the working directory and a killed run keeps it)
    task, folder = spec.task_dir(comp).resolve(), folder.resolve()
    if competitor == "mcgs":
        run_dir = folder / "run"
        if (run_dir / "mcgs.db").is_file():
            from mcgs.storage import Storage

            st = Storage(f"sqlite:///{run_dir / 'mcgs.db'}")
            spent = st.list_runs()[0].elapsed_s or 0.0
            st.close()
            return [sys.executable, "-m", "mcgs", "resume", str(run_dir)], run_dir / "best" / "submission.csv", spent
        return ([sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run_dir), "--time-budget", f"{spec.time_budget_s:.0f}s",
                 "--seed", str(spec.seed), "--cpu-threads", str(spec.threads), "--coder", "recipe"], run_dir / "best" / "submission.csv", 0.0)
    if folder.exists():  # a competitor that stopped part-way starts again
        shutil.rmtree(folder)
    return ([sys.executable, "-m", "mcgs.mlebench.competitors", competitor, "--task", str(task), "--out", str(folder),
             "--budget", f"{spec.time_budget_s:.1f}", "--threads", str(spec.threads), "--seed", str(spec.seed)], folder / "submission.csv", 0.0)


def _run_pair(spec: BenchSpec, comp: str, competitor: str, say: Callable[[str], None]) -> dict[str, Any]:
    folder = spec.out_dir / "runs" / comp / competitor
    commit = engine_commit()  # before the run: results committed meanwhile do not count
    cmd, submission, spent = _command(spec, comp, competitor, folder)
    folder.mkdir(parents=True, exist_ok=True)
    say(f"{comp} / {competitor}: {'resuming' if spent else 'running'} for {spec.time_budget_s - spent:.0f}s")
    limit = (spec.time_budget_s - spent) * KILL_FACTOR + KILL_GRACE_S
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}  # the recipe coder only, never a paid call
    start = time.monotonic()
    with open(folder / "stdout.txt", "ab") as out, open(folder / "stderr.txt", "ab") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True, cwd=folder)
        try:
            returncode = proc.wait(timeout=limit)
            status = "finished" if returncode == 0 else f"failed (exit {returncode})"
        except subprocess.TimeoutExpired:
            _stop_tree(proc, grace_s=0.0)
            status = f"killed after {limit:.0f}s"
        except BaseException:
            _stop_tree(proc)
            raise
    wall = spent + time.monotonic() - start
    if competitor == "mcgs":
        _keep_cost_rows(spec, comp, folder / "run", say)
    if spec.suite_dir is not None:
        report = grade_suite_submission(spec.suite_dir, comp, submission)
    else:
        report = grade_submission(comp, submission, spec.data_dir).to_dict()
    if not status.startswith("finished"):
        tail = (folder / "stderr.txt").read_text(errors="replace")[-1500:]
        report["error"] = f"{status}: {tail.strip()[-600:]}" if tail.strip() else status
    report.update(competitor=competitor, status=status, wall_s=round(wall, 1), budget_s=spec.time_budget_s,
                  overrun_s=round(wall - spec.time_budget_s, 1), seed=spec.seed, threads=spec.threads, commit=commit)
    return report


def _keep_cost_rows(spec: BenchSpec, comp: str, run_dir: Path, say: Callable[[str], None]) -> None:
    """Write the cost model's replay of an mcgs run (:func:`mcgs.cost_model.replay_run`) to
    ``<out>/cost_model/<comp>-seed<seed>.json``: issue 33 reports the prediction error per family
    on the suite's runs, and the run folders (``runs/``, gigabytes) are not kept where the
    results are. A run that cannot be replayed is said and skipped: the score still counts."""
    from mcgs.cost_model import replay_run

    try:
        rows = replay_run(run_dir)
    except Exception as exc:  # noqa: BLE001 - a side record; never lose the pair's grading for it
        say(f"{comp} / mcgs: the cost model's replay of {run_dir} failed ({type(exc).__name__}: {exc}); no cost_model/ rows for it")
        return
    atomic_write(spec.out_dir / "cost_model" / f"{comp}-seed{spec.seed}.json", json.dumps(rows, indent=1))


def _ratio(score: float | None, best: float | None, lower_is_better: bool) -> float | None:
    if score is None or best is None or score == 0:
        return None
    return best / score if lower_is_better else score / best


def _summary(results: list[dict[str, Any]], spec: BenchSpec) -> dict[str, Any]:
    table: dict[str, dict[str, Any]] = {}
    for comp in spec.competitions:
        rows = [r for r in results if r["competition_id"] == comp]
        scored = [r for r in rows if r["score"] is not None]
        lower = rows[0]["is_lower_better"] if rows else False
        best = (min if lower else max)((r["score"] for r in scored), default=None)
        table[comp] = {r["competitor"]: {**r, "ratio_to_best": _ratio(r["score"], best, lower)} for r in rows}
    ahead = []
    for comp, by in table.items():
        m, f = by.get("mcgs"), by.get("flaml")
        if m and f and m["score"] is not None:
            lower = m["is_lower_better"]
            ahead.append(f["score"] is None or (m["score"] < f["score"] if lower else m["score"] > f["score"]))
    return {"table": table, "mcgs_ahead_of_flaml": sum(ahead), "compared_with_flaml": len(ahead),
            "mcgs_vs_flaml": _mcgs_versus(table, ("flaml",)),
            "mcgs_vs_best_autogluon": _mcgs_versus(table, ("autogluon_medium", "autogluon_best")),
            "mean_normalised_score": _mean_normalised(table, spec.competitors)}


def _mcgs_versus(table: dict[str, dict[str, Any]], rivals: tuple[str, ...]) -> dict[str, float]:
    """mcgs's direction-aware ratio to the best of ``rivals`` per competition (issue 33's "ahead"
    and "% behind"): ``mcgs / rival`` when higher is better, ``rival / mcgs`` when lower is
    better, so > 1 means mcgs is ahead and 0.99 means 1 % behind. Only competitions where mcgs
    and every one of ``rivals`` have a result; a rival without a submission counts as beaten
    (ratio ``inf``), mcgs without one as 0; a score of 0 (no ratio) leaves the competition out."""
    out: dict[str, float] = {}
    for comp, by in table.items():
        m = by.get("mcgs")
        if m is None or any(r not in by for r in rivals):
            continue
        lower = m["is_lower_better"]
        scored = [by[r]["score"] for r in rivals if by[r]["score"] is not None]
        if m["score"] is None:
            out[comp] = 0.0
        elif not scored:
            out[comp] = float("inf")
        else:
            best = (min if lower else max)(scored)
            ratio = _ratio(m["score"], best, lower)
            if ratio is not None:  # None: a score of 0 has no ratio
                out[comp] = ratio
    return out


def _mean_normalised(table: dict[str, dict[str, Any]], competitors: tuple[str, ...]) -> dict[str, float | None]:
    """Each competitor's mean normalised score: per task ``(score - lightgbm) / (best - lightgbm)``
    (0 = LightGBM with defaults, 1 = the task's best competitor; the same in either metric
    direction), over the tasks where LightGBM and the best scored and differ. A missing
    submission counts 0 on that task. None without LightGBM in the comparison."""
    if "lightgbm" not in competitors:
        return {c: None for c in competitors}
    sums = {c: [] for c in competitors}
    for by in table.values():
        base = by.get("lightgbm", {}).get("score")
        scored = [r for r in by.values() if r["score"] is not None]
        if base is None or not scored:
            continue
        lower = scored[0]["is_lower_better"]
        best = (min if lower else max)(r["score"] for r in scored)
        if best == base:
            continue
        for c in competitors:
            if c in by:
                score = by[c]["score"]
                sums[c].append(0.0 if score is None else (score - base) / (best - base))
    return {c: (round(sum(v) / len(v), 4) if v else None) for c, v in sums.items()}


def _versus_line(versus: dict[str, float], rival: str) -> str:
    """One report line: on how many competitions mcgs is ahead of ``rival`` and how far behind it
    is where it is not (ratios from :func:`_mcgs_versus`)."""
    ahead = sum(1 for v in versus.values() if v > 1.0)
    behind = {c: v for c, v in versus.items() if v < 1.0}
    line = f"mcgs against {rival}: ahead on {ahead} of {len(versus)} ({100 * ahead / len(versus):.0f} %)"
    if behind:
        line += "; behind on " + ", ".join(f"{c} by {100 * (1 - v):.2f} %" for c, v in sorted(behind.items(), key=lambda kv: kv[1]))
    return line + "."


def combine_seeds(bench_dirs: list[Path], competitions: list[str] | None = None) -> dict[str, Any]:
    """One comparison from several bench folders of the same competitors and budget run with
    different ``--seed`` (issue 33: three seeds on the tasks below 10 000 rows, one above): each
    (competition, competitor) pair's score is the mean over the seeds that have a result, and the
    summary (ratios to the best, mcgs against FLAML and AutoGluon, mean normalised score) is
    computed on those means as :func:`run_bench` computes it on one seed.

    Args:
        bench_dirs: Bench folders (``--out`` of ``mcgs bench``), each with ``results/*.json``.
        competitions: Order of the table's rows (default: the first folder's ``bench.json``
            order, then any others alphabetically).

    Returns:
        A summary as :func:`run_bench` returns, each result with ``seeds`` (the seeds averaged)
        and ``seed_scores``; ``None`` scores (no submission) count as missing seeds unless every
        seed has none.

    Raises:
        ValueError: a folder without ``results/``, or folders whose budgets differ.
    """
    pairs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    budgets = set()
    order: list[str] = []
    for d in bench_dirs:
        files = sorted((Path(d) / "results").glob("*.json"))
        if not files:
            raise ValueError(f"{d} has no results/*.json; pass the --out folder of a `mcgs bench` run")
        summary_file = Path(d) / "bench.json"
        if summary_file.is_file() and not order:
            order = list(json.loads(summary_file.read_text())["table"])
        for f in files:
            r = json.loads(f.read_text())
            budgets.add(r["budget_s"])
            pairs.setdefault((r["competition_id"], r["competitor"]), []).append(r)
    if len(budgets) > 1:
        raise ValueError(f"the folders were run with different budgets ({sorted(budgets)} s); combine runs of one budget")
    results = []
    for (comp, competitor), rows in pairs.items():
        scored = [r for r in rows if r["score"] is not None]
        rep = dict((scored or rows)[0])
        rep.update(score=(sum(r["score"] for r in scored) / len(scored)) if scored else None,
                   seeds=sorted(r["seed"] for r in rows), seed_scores={r["seed"]: r["score"] for r in rows},
                   wall_s=max(r["wall_s"] for r in rows), overrun_s=max(r["overrun_s"] for r in rows))
        results.append(rep)
    present = {r["competition_id"] for r in results}
    comps = competitions or [c for c in order if c in present] + sorted(present - set(order))
    competitors = tuple(c for c in ALL_COMPETITORS if any(r["competitor"] == c for r in results))
    summary = _summary(results, _Rows(tuple(comps), competitors))
    summary.update(competitors=list(competitors), done_pairs=len(results), planned_pairs=len(comps) * len(competitors),
                   time_budget_s=budgets.pop(), seeds_by_pair={f"{c}-{k}": v["seeds"] for c, by in summary["table"].items() for k, v in by.items()})
    return summary


@dataclasses.dataclass(frozen=True)
class _Rows:
    """What :func:`_summary` reads of a :class:`BenchSpec`: the table's rows and columns."""

    competitions: tuple[str, ...]
    competitors: tuple[str, ...]


def grade_suite_submission(suite_dir: Path, name: str, submission: Path) -> dict[str, Any]:
    """Grade a submission for a public-suite task against ``suite_dir/answers/<name>.csv``.

    The checks are the engine's (:func:`mcgs.evaluation.validate_submission`: the one
    validator), and the score is the engine's (:func:`mcgs.evaluation.score_predictions` with
    the task's metric), on the held-out rows the answers hold.

    Returns:
        A report with the grading report's fields (``competition_id``, ``score``,
        ``is_lower_better``, ``valid_submission``, ``submission_exists``, ``error``; medals
        False: a suite task has no leaderboard).
    """
    import pandas as pd

    from mcgs.evaluation import OutputError, score_predictions, validate_submission
    from mcgs.task import load_task

    spec = load_task(suite_dir / "tasks" / name)
    report: dict[str, Any] = {
        "competition_id": name, "score": None, "gold_medal": False, "silver_medal": False, "bronze_medal": False,
        "any_medal": False, "above_median": None, "is_lower_better": not spec.higher_is_better,
        "submission_exists": submission.is_file(), "valid_submission": False, "submission_path": str(submission), "error": None,
    }
    if not submission.is_file():
        report["error"] = f"no submission at {submission}"
        return report
    sample = pd.read_csv(spec.sample_submission_path, dtype=str, keep_default_na=False)
    try:
        validate_submission(spec, sample, submission.parent, submission.name)
    except OutputError as exc:
        report["error"] = str(exc)
        return report
    sub = pd.read_csv(submission, dtype=str, keep_default_na=False).set_index(spec.id_column)
    answers = pd.read_csv(suite_dir / "answers" / f"{name}.csv", dtype=str, keep_default_na=False)
    pred = sub.loc[answers[spec.id_column], spec.prediction_columns].astype(float).to_numpy()
    y_true = answers[spec.target_columns[0]].to_numpy()
    report.update(score=round(float(score_predictions(spec, y_true, pred)), 6), valid_submission=True)
    return report


def run_bench(spec: BenchSpec, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) every pair, then write ``results/<id>-<competitor>.json``, ``bench.json``
    and ``bench.md`` under ``spec.out_dir``.

    The table is rewritten after every finished pair, marked partial until all pairs are done, so
    a comparison spread over several sittings always reports what is finished.

    Returns:
        ``{"table": {competition: {competitor: result}}, "mcgs_ahead_of_flaml": int,
        "compared_with_flaml": int, ...}``; each result is a grading report plus ``status``,
        ``wall_s``, ``overrun_s`` and ``ratio_to_best``.

    Raises:
        MLEBenchError: an unknown competition, or one neither prepared nor preparable.
        KeyboardInterrupt: after killing the running competitor; rerun to resume.
    """
    from mcgs.experience import without_experience

    without_experience()  # the runs stay reproducible: no experience store unless MCGS_EXPERIENCE_STORE names one
    for comp in spec.competitions:
        if spec.suite_dir is None:
            ensure_prepared(comp, spec.data_dir, spec.raw_root, say)
        elif not (spec.task_dir(comp) / "task.yaml").is_file():
            raise ValueError(f"{spec.suite_dir} has no suite task {comp!r}; build it with experiments/suite.py --out {spec.suite_dir}")
    planned = len(spec.competitions) * len(spec.competitors)
    for comp in spec.competitions:
        for competitor in spec.competitors:
            rep, ran = load_or_run(spec.out_dir / "results" / f"{comp}-{competitor}.json", lambda: _run_pair(spec, comp, competitor, say))
            if ran:
                done = _stored_results(spec)  # with the pairs later in the order that earlier sittings finished
                if len(done) < planned:
                    _write_summary(spec, done, planned)
                say(f"{comp} / {competitor}: score {rep['score']}, wall {rep['wall_s']:.0f}s (overrun {rep['overrun_s']:+.0f}s), {rep['status']}; "
                    f"{len(done)} of {planned} pairs done")
    return _write_summary(spec, _stored_results(spec), planned)


def _stored_results(spec: BenchSpec) -> list[dict[str, Any]]:
    """Every planned pair's stored result (``results/<competition>-<competitor>.json``), in the
    bench's order; pairs not run yet are left out."""
    found = []
    for comp in spec.competitions:
        for competitor in spec.competitors:
            path = spec.out_dir / "results" / f"{comp}-{competitor}.json"
            if path.is_file():
                found.append(json.loads(path.read_text()))
    return found


def _write_summary(spec: BenchSpec, results: list[dict[str, Any]], planned: int) -> dict[str, Any]:
    """Summarise the finished ``results`` and write ``bench.json`` and ``bench.md`` (``done_pairs``
    of ``planned_pairs``: fewer means the comparison is not finished)."""
    summary = _summary(results, spec)
    summary.update(date=dt.datetime.now().isoformat(timespec="seconds"), machine=f"{platform.machine()}, {os.cpu_count()} cores",
                   time_budget_s=spec.time_budget_s, command=bench_command(spec), competitors=list(spec.competitors),
                   done_pairs=len(results), planned_pairs=planned)
    atomic_write(spec.out_dir / "bench.json", json.dumps(summary, indent=2, default=str))
    atomic_write(spec.out_dir / "bench.md", render_bench_markdown(summary))
    return summary


def render_bench_markdown(summary: dict[str, Any]) -> str:
    """The report: scores with ratios to the best, medals, and each competitor's overrun."""
    comps = summary["competitors"]
    lines = [
        f"# Equal-budget comparison ({summary['date']})",
        "",
        f"Machine: {summary['machine']}. Budget per competitor and competition: {summary['time_budget_s']:.0f}s. "
        f"Command: `{summary['command']}`",
        "",
    ]
    lines += partial_notice(summary.get("done_pairs", 0), summary.get("planned_pairs", 0), "pairs done")
    lines += [
        "Private-split score (ratio to the competition's best score, 1 = best; medal if any). "
        "`no submission`: the competitor wrote no valid submission; `not run`: the pair is not done yet.",
        "",
        "| competition | " + " | ".join(comps) + " |",
        "|---|" + "---|" * len(comps),
    ]
    for comp, by in summary["table"].items():
        cells = []
        for c in comps:
            r = by.get(c)
            if r is None or r["score"] is None:
                cells.append("not run" if r is None else "no submission")
                continue
            medal = "gold" if r["gold_medal"] else "silver" if r["silver_medal"] else "bronze" if r["bronze_medal"] else ""
            seeds = f" [mean of {len(r['seeds'])} seeds]" if len(r.get("seeds", ())) > 1 else ""
            cells.append(f"{fmt_number(r['score'], 5)} ({r['ratio_to_best']:.3f}){' ' + medal if medal else ''}{seeds}")
        lines.append(f"| {comp} | " + " | ".join(cells) + " |")
    lines += ["", "Wall time less budget (s; positive = overran), and how each process ended:", "",
              "| competition | " + " | ".join(comps) + " |", "|---|" + "---|" * len(comps)]
    for comp, by in summary["table"].items():
        cells = [f"{by[c]['overrun_s']:+.0f} ({by[c]['status']})" if c in by else "not run" for c in comps]
        lines.append(f"| {comp} | " + " | ".join(cells) + " |")
    if summary["compared_with_flaml"]:
        lines += ["", f"mcgs ahead of FLAML on {summary['mcgs_ahead_of_flaml']} of {summary['compared_with_flaml']} competitions."]
    for key, rival in (("mcgs_vs_flaml", "FLAML"), ("mcgs_vs_best_autogluon", "the better AutoGluon preset")):
        versus = summary.get(key) or {}
        if versus:
            lines += ["", _versus_line(versus, rival)]
    normalised = summary.get("mean_normalised_score") or {}
    if any(v is not None for v in normalised.values()):
        lines += ["", "Mean normalised score (0 = LightGBM with defaults, 1 = each task's best competitor; no submission = 0): "
                  + ", ".join(f"{c} {v:.3f}" for c, v in normalised.items() if v is not None) + "."]
    return "\n".join(lines) + "\n"
