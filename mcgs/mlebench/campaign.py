"""MLE-bench campaigns: search and grade competitions x seeds, resumably, and aggregate.

One call runs the search for every (competition, seed) pair, grades each final submission
with :func:`~mcgs.mlebench.grade.grade_submission`, writes one grading report per run (MLE-bench's
``CompetitionReport`` fields plus mcgs's: seed, nodes, wall time, LLM cost) and an aggregate in
the way MLE-bench summarises runs (``mlebench/grade.py`` ``aggregate_reports`` and the paper's
Table 2): any-medal %, gold / silver / bronze counts, valid-submission %, above-median %, and
the score's mean ± standard error over seeds.

Plots (``plots/``): best-so-far validation score over time per competition (one line per
seed) and the aggregate as a bar chart.

Resumable: a pair whose report exists is skipped; a pair whose run stopped part-way (Ctrl-C,
a killed machine) is resumed from its storage with the budget it has left.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import math
import os
import platform
import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from mcgs.mlebench.grade import grade_submission
from mcgs.mlebench.prepare import prepare_competition
from mcgs.mlebench.registry import MLEBenchError, get_competition

__all__ = ["CampaignSpec", "run_campaign", "aggregate_reports", "render_campaign_markdown", "partial_notice", "fmt_number"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CampaignSpec:
    """What to run.

    Attributes:
        competitions: MLE-bench competition ids.
        seeds: Search seeds (one run per competition and seed).
        time_budget_s: Wall budget of each run, seconds.
        data_dir: Folder of prepared competitions (``<id>/config.yaml`` ...).
        out_dir: Where runs (``runs/``), reports (``reports/``) and the aggregate go.
        raw_root: Folder holding ``<id>/raw`` (Kaggle's files); competitions missing from
            ``data_dir`` are prepared from it. None: they must be prepared already.
        settings: Extra :class:`~mcgs.settings.SearchSettings` fields for every run.
    """

    competitions: tuple[str, ...]
    seeds: tuple[int, ...]
    time_budget_s: float
    data_dir: Path
    out_dir: Path
    raw_root: Path | None = None
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)


def engine_commit(root: Path | None = None) -> str:
    """The git commit (short hash) of the mcgs source that runs, with ``+modified`` when the
    engine's folders (``mcgs``, ``operators``, ``knowledge_base``) differ from it, or the
    package version when the source is not a git checkout. Taken when a run starts and stored
    in its report, so a campaign resumed later says what produced each result.

    Args:
        root: The checkout to ask (default: the one this module was loaded from).
    """
    import subprocess

    from mcgs import __version__

    root = root if root is not None else Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=root)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != root.resolve():  # an installed copy (inside some other repository, maybe)
        return __version__
    rev = git("rev-parse", "--short", "HEAD")
    if not rev:
        return __version__
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "mcgs", "operators", "knowledge_base")
    return f"{rev}+modified" if changed else rev


def campaign_command(spec: CampaignSpec) -> str:
    """The ``mcgs mlebench campaign`` command line that reproduces ``spec``."""
    seeds = ",".join(str(s) for s in spec.seeds)
    cmd = (f"mcgs mlebench campaign --competitions {','.join(spec.competitions)} --seeds {seeds} "
           f"--time-budget {spec.time_budget_s:.0f}s --data {spec.data_dir} --out {spec.out_dir}")
    cmd += f" --raw {spec.raw_root}" if spec.raw_root is not None else ""
    return cmd + (f" --coder {spec.settings['coder']}" if "coder" in spec.settings else "")


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader (or a
    resumed campaign) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_or_run(path: Path, run: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """The result a previous sitting stored at ``path``, or ``run()``'s, stored there atomically
    (what makes campaigns and benches resumable). Returns ``(result, ran_now)``."""
    if path.is_file():
        return json.loads(path.read_text()), False
    result = run()
    atomic_write(path, json.dumps(result, indent=2))
    return result, True


def partial_notice(done: int, planned: int, unit: str) -> list[str]:
    """Markdown lines saying a resumable report is not finished (``done`` of ``planned``
    ``unit``), or no lines when it is; shared by the campaign and bench reports."""
    if done >= planned:
        return []
    return [f"**Partial: {done} of {planned} {unit}**; rerun the command to run the rest (finished ones are skipped).", ""]


def ensure_prepared(comp: str, data_dir: Path, raw_root: Path | None, say: Callable[[str], None]) -> None:
    """Make sure ``data_dir/comp`` holds the prepared competition, preparing it from
    ``raw_root/comp/raw`` when it is missing.

    Raises:
        MLEBenchError: an unknown competition id (the known ones are named), or one that is not
            prepared while ``raw_root`` is None (the command to prepare it is given).
    """
    get_competition(comp)  # unknown ids fail here, naming the known ones
    if (data_dir / comp / "config.yaml").is_file():
        return
    if raw_root is None:
        raise MLEBenchError(
            f"{comp} is not prepared in {data_dir}: run `mcgs mlebench prepare {comp} --raw RAW --out {data_dir}` "
            f"or pass --raw FOLDER holding {comp}/raw"
        )
    say(f"{comp}: preparing from {raw_root / comp / 'raw'}")
    prepare_competition(comp, raw_root / comp / "raw", data_dir)


def _run_one(comp: str, seed: int, spec: CampaignSpec, say: Callable[[str], None]) -> dict[str, Any]:
    from mcgs.budget import MIN_CANDIDATE_S
    from mcgs.run_folder import DB_NAME
    from mcgs.search import create_search, open_search
    from mcgs.settings import SearchSettings

    run_dir = spec.out_dir / "runs" / f"{comp}-seed{seed}"
    commit = engine_commit()  # before the search: results committed during a run do not count
    if (run_dir / DB_NAME).exists():
        search = open_search(run_dir)
        if search.run_record.status != "finished":
            say(f"{comp} seed {seed}: resuming ({search.clock.remaining:.0f}s of budget left)")
            if search.clock.remaining > MIN_CANDIDATE_S:
                search.run()
    else:
        say(f"{comp} seed {seed}: searching for {spec.time_budget_s:.0f}s")
        settings = SearchSettings(time_budget_s=spec.time_budget_s, seed=seed, **spec.settings)
        search = create_search(spec.data_dir / comp, run_dir, settings=settings)
        search.run()
    from mcgs.plots import best_so_far

    report = grade_submission(comp, run_dir / "best" / "submission.csv", spec.data_dir).to_dict()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    report.update(
        seed=seed,
        run_dir=str(run_dir),
        nodes=len(nodes),
        valid_nodes=sum(n.is_valid for n in nodes),
        wall_s=round(search.storage.get_run(search.run_record.name).elapsed_s, 1),
        llm_cost_usd=round(search.storage.llm_spend_usd(search.run_id), 6),
        time_budget_s=spec.time_budget_s,
        commit=commit,
        metric=search.task.metric,
        best_so_far=best_so_far(search.nodes(), search.task.higher_is_better),
    )
    search.storage.close()
    return report


def run_campaign(spec: CampaignSpec, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the campaign and write ``reports/<id>-seed<k>.json``,
    ``campaign.json`` and ``campaign.md`` under ``spec.out_dir``.

    The aggregate is rewritten after every graded pair, marked partial until all pairs are
    graded, so a campaign spread over several sittings always has an up-to-date report of what
    is finished; the plots are drawn once all pairs are graded.

    A run that fails (an error in its task or the engine) is said, logged with its traceback and
    left ungraded; the campaign goes on with the next run, and a rerun tries the failed one again.

    Returns:
        The aggregate (see :func:`aggregate_reports`) plus ``reports`` and ``failed`` (one line
        per failed run: competition, seed and the error).

    Raises:
        MLEBenchError: an unknown competition, or one neither prepared nor preparable.
        KeyboardInterrupt: after the running search recorded its state; rerun to resume.
    """
    from mcgs.experience import without_experience

    without_experience()  # the runs stay reproducible: no experience store unless MCGS_EXPERIENCE_STORE names one
    for comp in spec.competitions:
        ensure_prepared(comp, spec.data_dir, spec.raw_root, say)
    planned = len(spec.competitions) * len(spec.seeds)
    reports, failed = [], []
    for comp in spec.competitions:
        for seed in spec.seeds:
            try:
                rep, ran = load_or_run(spec.out_dir / "reports" / f"{comp}-seed{seed}.json", lambda: _run_one(comp, seed, spec, say))
            except Exception as exc:  # one run's failure does not cost the others (KeyboardInterrupt still stops)
                logger.exception("%s seed %s failed", comp, seed)
                failed.append(f"{comp} seed {seed}: {type(exc).__name__}: {exc}")
                say(f"{comp} seed {seed}: FAILED ({type(exc).__name__}: {exc}); going on with the next run (a rerun tries it again)")
                continue
            reports.append(rep)
            if not ran:
                continue
            if len(reports) < planned:
                _write_aggregate(spec, reports, planned)
            medal = "gold" if rep["gold_medal"] else "silver" if rep["silver_medal"] else "bronze" if rep["bronze_medal"] else "no medal"
            say(f"{comp} seed {seed}: score {rep['score']} ({medal}{', above median' if rep['above_median'] else ''}); "
                f"{len(reports)} of {planned} runs graded")
    agg = _write_aggregate(spec, reports, planned)
    if not failed:
        _plots(spec, agg, reports)
    return {**agg, "reports": reports, "failed": failed}


def _write_aggregate(spec: CampaignSpec, reports: list[dict[str, Any]], planned: int) -> dict[str, Any]:
    """Aggregate the graded ``reports`` and write ``campaign.json`` and ``campaign.md``
    (``graded_runs`` of ``planned_runs``: fewer means the campaign is not finished)."""
    agg = aggregate_reports(reports)
    agg.update(
        date=dt.datetime.now().isoformat(timespec="seconds"),
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        time_budget_s=spec.time_budget_s,
        seeds=list(spec.seeds),
        command=campaign_command(spec),
        graded_runs=len(reports),
        planned_runs=planned,
    )
    atomic_write(spec.out_dir / "campaign.json", json.dumps({**agg, "reports": reports}, indent=2, default=str))
    atomic_write(spec.out_dir / "campaign.md", render_campaign_markdown(agg, reports))
    return agg


def _plots(spec: CampaignSpec, agg: dict[str, Any], reports: list[dict[str, Any]]) -> None:
    """``plots/<id>.png`` (best-so-far validation score over time, one line per seed) and
    ``plots/campaign.png`` (the aggregate)."""
    from mcgs.plots import plot_best_so_far, plot_campaign

    for comp in spec.competitions:
        reps = [r for r in reports if r["competition_id"] == comp]
        curves = {f"seed {r['seed']}": [tuple(p) for p in r.get("best_so_far") or []] for r in reps}
        metric = next((r.get("metric") for r in reps if r.get("metric")), "score")
        plot_best_so_far(curves, spec.out_dir / "plots" / f"{comp}.png", title=comp, metric=metric)
    plot_campaign(agg, spec.out_dir / "plots" / "campaign.png")


def _mean_se(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    if len(values) == 1:
        return float(values[0]), None
    return statistics.mean(values), statistics.stdev(values) / math.sqrt(len(values))


def _shares(reps: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(reps)
    pct = lambda k: round(100.0 * sum(bool(r.get(k)) for r in reps) / n, 1) if n else None  # noqa: E731
    cost = [r.get("llm_cost_usd") or 0.0 for r in reps]
    wall = [r.get("wall_s") or 0.0 for r in reps]
    return {
        "runs": n,
        "valid_submission_pct": pct("valid_submission"),
        "any_medal_pct": pct("any_medal"),
        "above_median_pct": pct("above_median"),
        "gold": sum(bool(r.get("gold_medal")) for r in reps),
        "silver": sum(bool(r.get("silver_medal")) for r in reps),
        "bronze": sum(bool(r.get("bronze_medal")) for r in reps),
        "mean_wall_s": round(statistics.mean(wall), 1) if wall else None,
        "mean_llm_cost_usd": round(statistics.mean(cost), 6) if cost else None,
    }


def aggregate_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate grading reports: overall shares and counts, and per competition the same
    plus the score's mean ± standard error over seeds (invalid runs excluded from the mean).

    Returns:
        ``{"overall": {...}, "competitions": {id: {...}}}``.
    """
    by_comp: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        by_comp.setdefault(r["competition_id"], []).append(r)
    comps = {}
    for comp, reps in by_comp.items():
        scores = [r["score"] for r in reps if r.get("score") is not None]
        mean, se = _mean_se(scores)
        comps[comp] = {
            **_shares(reps),
            "score_mean": mean,
            "score_se": se,
            "score_median": statistics.median(scores) if scores else None,
            "median_threshold": reps[0].get("median_threshold"),
            "is_lower_better": reps[0].get("is_lower_better"),
        }
    return {"overall": _shares(reports), "competitions": comps}


def fmt_number(x: float | None, digits: int = 6) -> str:
    """A score or threshold as a leaderboard prints it (0.5995950000000001 -> 0.599595), or
    ``-`` for None; shared by the campaign and bench reports."""
    return "-" if x is None else format(x, f".{digits}g")


def render_campaign_markdown(agg: dict[str, Any], reports: list[dict[str, Any]]) -> str:
    """The campaign's Markdown report: aggregate table, per-competition table, per-run table."""
    o = agg["overall"]
    lines = [
        f"# MLE-bench campaign ({agg.get('date', '')})",
        "",
        f"Machine: {agg.get('machine', '?')}. Budget per run: {agg.get('time_budget_s', 0):.0f} s. Seeds: {agg.get('seeds')}. "
        f"Engine commit(s): {', '.join(sorted({str(r.get('commit', '?')) for r in reports}))}.",
        "",
        f"Command: `{agg.get('command', '?')}`",
        "",
    ]
    lines += partial_notice(agg.get("graded_runs", len(reports)), agg.get("planned_runs", len(reports)), "runs graded")
    lines += [
        "| runs | valid submission | any medal | gold | silver | bronze | above median | mean wall (s) | mean LLM cost (USD) |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {o['runs']} | {o['valid_submission_pct']} % | {o['any_medal_pct']} % | {o['gold']} | {o['silver']} | {o['bronze']} | {o['above_median_pct']} % | {o['mean_wall_s']} | {o['mean_llm_cost_usd']} |",
        "",
        "| competition | runs | score (mean ± SE) | score (median) | grader median | above median | medals (gold/silver/bronze) | valid |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for comp, c in agg["competitions"].items():
        score = "-" if c["score_mean"] is None else f"{c['score_mean']:.5g}" + ("" if c["score_se"] is None else f" ± {c['score_se']:.2g}")
        lines.append(
            f"| {comp} | {c['runs']} | {score} | {fmt_number(c.get('score_median'), 5)} | {fmt_number(c['median_threshold'])} | {c['above_median_pct']} % | {c['gold']}/{c['silver']}/{c['bronze']} | {c['valid_submission_pct']} % |"
        )
    lines += ["", "| competition | seed | score | medal | above median | nodes (valid) | wall (s) | LLM cost (USD) |", "|---|---|---|---|---|---|---|---|"]
    for r in reports:
        medal = "gold" if r.get("gold_medal") else "silver" if r.get("silver_medal") else "bronze" if r.get("bronze_medal") else "-"
        lines.append(
            f"| {r['competition_id']} | {r.get('seed')} | {r.get('score')} | {medal} | {r.get('above_median')} | {r.get('nodes')} ({r.get('valid_nodes')}) | {r.get('wall_s')} | {r.get('llm_cost_usd')} |"
        )
    return "\n".join(lines) + "\n"
