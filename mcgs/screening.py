"""Multi-plan drafting: write more draft plans than the search will draft, run each cheaply on
a row subsample with a short time limit, and draft the best-ranked ones first.

After AutoML-Agent (Trirat et al., ICML 2025, §3.3 "retrieval-augmented planning" with several
plans, and §3.4's execution-based verification), with a real run instead of the LLM's
simulated one: each plan is a full program, run in the sandbox on ``screen_rows`` training
rows (stratified for classification) and a few hundred test rows, and scored by the engine on
the same metric and fold scheme as the task. The screening's files live under
``RUN_DIR/screen/``; its ranking is stored in ``RUN_DIR/screen/plans.json`` so a resumed run
reuses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from mcgs.direction import best_first
from mcgs.coders import CoderAnswer
from mcgs.cost_model import UNSEEN_FAMILY_MARGIN, CostModel, run_cost_model
from mcgs.task import TaskSpec, default_n_splits, read_table

__all__ = ["PlanResult", "PlanQueue", "build_screen_task", "screen_rows_for", "run_screen", "rank_plans", "save_plans", "load_plans"]

# The screening subsample grows with the data up to this many times ``screen_rows``.
SCREEN_ROWS_GROWTH = 10
# Test rows each screening program predicts (enough to check the submission's shape).
SCREEN_TEST_ROWS = 300
# A plan out of time or memory on the screening subsample is screened again on this share of
# its rows (at least LOW_FIDELITY_MIN_ROWS): slow is not wrong, and a machine that is busy makes
# every plan slow (issue 33: boosted trees timed out and were drafted last behind k-NN).
LOW_FIDELITY_SHARE = 0.25
LOW_FIDELITY_MIN_ROWS = 200
# The low-fidelity pass gets at least this share of the screening's share on top of what the
# full pass left: on a machine where every plan overruns its part, the full pass spends the
# whole share and the slow plans were never judged (issue 33: on trump_tweets_source 6 of 8
# plans timed out at 7.5 s, LightGBM among them, and it was not drafted).
LOW_PASS_SHARE = 0.5


@dataclasses.dataclass
class PlanResult:
    """One screened plan.

    Attributes:
        answer: The coder's plan, program and config.
        state: ``valid``, ``buggy``, ``timeout``, ``oom``, ``invalid_output``, ``rejected`` (by
            the Code Review) or ``skipped`` (the screening's time share ran out first).
        score: Engine score on the subsample (valid plans only).
        runtime_s: Wall time of the screening run.
        error: Short reason for a failure.
        rows: Training rows of the subsample ``state`` and ``score`` are from (its fidelity;
            None when not run). Scores of different fidelities are never compared.
        slow: The plan ran out of time or memory on the full screening subsample and was
            screened again on fewer rows.
    """

    answer: CoderAnswer
    state: str = "skipped"
    score: float | None = None
    runtime_s: float = 0.0
    error: str | None = None
    rows: int | None = None
    slow: bool = False

    def to_json(self) -> dict[str, Any]:
        a = self.answer
        return {
            "plan": a.plan, "code": a.code, "config": a.config, "knowledge_ids": list(a.knowledge_ids), "ledger_ids": list(a.ledger_ids),
            "state": self.state, "score": self.score, "runtime_s": round(self.runtime_s, 2), "error": self.error,
            "rows": self.rows, "slow": self.slow,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "PlanResult":
        answer = CoderAnswer(plan=d["plan"], code=d["code"], config=d["config"], knowledge_ids=tuple(d["knowledge_ids"]),
                             ledger_ids=tuple(d.get("ledger_ids", ())))
        return cls(answer=answer, state=d["state"], score=d["score"], runtime_s=d["runtime_s"], error=d["error"],
                   rows=d.get("rows"), slow=d.get("slow", False))


def _write_rows(src: Path, dest: Path, rows) -> None:
    """Copy the given row positions of a table, keeping its format (CSV, or JSON records)."""
    if src.suffix.lower() == ".json" and src.read_text()[:1000].lstrip().startswith("["):
        records = json.loads(src.read_text())
        dest.write_text(json.dumps([records[i] for i in rows]))
    elif src.suffix.lower() == ".csv":
        import pandas as pd

        pd.read_csv(src).iloc[list(rows)].to_csv(dest, index=False)
    else:  # JSON lines
        lines = src.read_text().splitlines()
        dest.write_text("\n".join(lines[i] for i in rows) + "\n")


def screen_rows_for(n_train: int, screen_rows: int) -> int:
    """Training rows of the screening subsample: a tenth of the task's rows, at least
    ``screen_rows`` and at most :data:`SCREEN_ROWS_GROWTH` times it (2 000 to 20 000 with the
    default), never more than the task has. Which family wins on a large table is often decided
    by data a 2 000-row sample does not show (boosted trees overtake k-NN and linear models as
    the rows grow), so the subsample grows with the data, while the screening's share of the
    budget (``screen_share``) stays what it is."""
    return min(n_train, max(screen_rows, min(n_train // 10, SCREEN_ROWS_GROWTH * screen_rows)))


def build_screen_task(spec: TaskSpec, dest: Path, max_rows: int, seed: int, keep_holdout: bool = False) -> TaskSpec:
    """Write a row subsample of the task under ``dest`` and return its spec.

    Training rows: ``min(n_train, max_rows)``, stratified on the label for classification
    (scikit-learn ``train_test_split``), in their original order; a task validated on a holdout
    is validated with the default k folds for the subsample's rows, unless ``keep_holdout``;
    stratified folds are fewer when the subsample's rarest class has fewer rows than folds
    (plain folds when it has one). Test rows: the first
    :data:`SCREEN_TEST_ROWS` (and the matching sample-submission rows). Extra input files
    are linked, not copied.
    """
    import numpy as np
    from sklearn.model_selection import train_test_split

    dest.mkdir(parents=True, exist_ok=True)
    n = spec.n_train
    rows = np.arange(n)
    labels = None
    if n > max_rows:
        y = None
        if spec.task_kind in ("binary", "multiclass"):
            labels = read_table(spec.train_path)[spec.target_columns[0]].astype(str)
            counts = labels.value_counts()
            if counts.min() >= 2 and max_rows >= len(counts):
                y = labels.to_numpy()
        rows, _ = train_test_split(rows, train_size=max_rows, stratify=y, random_state=seed)
        rows = np.sort(rows)
    test_rows = np.arange(min(spec.n_test, SCREEN_TEST_ROWS))
    _write_rows(spec.train_path, dest / spec.train_file, rows)
    _write_rows(spec.test_path, dest / spec.test_file, test_rows)
    _write_rows(spec.sample_submission_path, dest / spec.sample_submission_file, test_rows)
    graph_update = {}
    if spec.graph is not None:  # every node stays in the graph: the rows left out join its other nodes
        graph_update = {"graph": _keep_graph_nodes(spec, dest, rows, test_rows)}
    for name in spec.extra_files:
        link = dest / name
        if not link.exists() and not (spec.graph is not None and name == spec.graph.nodes):
            os.symlink(spec.data_dir / name, link)
    validation = spec.validation
    if validation.kind == "holdout" and not keep_holdout:  # a holdout of a small subsample is noisy: k folds there
        plain = "stratified_kfold" if spec.task_kind in ("binary", "multiclass") else "kfold"
        validation = validation.model_copy(update={"kind": plain, "n_splits": default_n_splits(len(rows))})
    if validation.kind == "stratified_kfold" and labels is not None:
        # the subsample's rarest class may have fewer rows than folds (leaf-classification's 99 classes
        # of 6-10 rows, a quarter of them kept): as many folds as it has rows, or plain folds below two
        smallest = int(labels.iloc[rows].value_counts().min())
        if smallest < validation.n_splits:
            validation = validation.model_copy(update={"n_splits": smallest} if smallest >= 2 else {"kind": "kfold"})
    return spec.model_copy(update={"data_dir": dest.resolve(), "n_train": len(rows), "n_test": len(test_rows), "validation": validation,
                                   **graph_update, "extra_files": sorted((set(spec.extra_files) - {spec.graph.nodes}) | set(graph_update["graph"].files()))
                                   if graph_update else spec.extra_files})


#: The other-node table of a graph task's subsample (:func:`build_screen_task`).
SUBSAMPLE_NODES = "subsample_nodes.csv"


def _keep_graph_nodes(spec: TaskSpec, dest: Path, rows, test_rows):
    """The graph of a graph task's row subsample: the training and test rows left out are written,
    with the graph's other nodes, to ``dest/``:data:`SUBSAMPLE_NODES` (the test table's columns,
    no label), so every edge still joins known nodes and propagation sees the whole graph."""
    import numpy as np
    import pandas as pd

    cols = list(read_table(spec.test_path).columns)
    parts = [read_table(spec.train_path).drop(index=np.asarray(rows)).reindex(columns=cols),
             read_table(spec.test_path).drop(index=np.asarray(test_rows))]
    if spec.graph.nodes:
        parts.append(read_table(spec.data_dir / spec.graph.nodes)[cols])
    pd.concat(parts, ignore_index=True).to_csv(dest / SUBSAMPLE_NODES, index=False)
    return spec.graph.model_copy(update={"nodes": SUBSAMPLE_NODES})


def run_screen(
    plans: list[CoderAnswer],
    screen: TaskSpec,
    folder: Path,
    *,
    timeout_s: float,
    time_share_s: float,
    threads: int,
    memory_mb: int,
    cancel: threading.Event | None = None,
    train_only_columns=(),
    isolation: str = "process-session",
    disk_mb: float | None = None,
    max_output_bytes: int | None = None,
    costs: "CostModel | None" = None,
) -> list[PlanResult]:
    """Review and run each plan on the screening task, then screen the slow ones again on
    :data:`LOW_FIDELITY_SHARE` of its rows. Return one :class:`PlanResult` per plan (plans not
    run are ``skipped``). ``disk_mb`` and ``max_output_bytes`` are the run's disk cap and
    output-file cap (:mod:`mcgs.candidate_files`).

    The full pass runs the plans in the coder's order, each with an equal part of
    ``time_share_s`` (at least 5 s, at most ``timeout_s``), until the share is spent. With a
    cost model (``costs``: the task's, :class:`mcgs.cost_model.CostModel`), it learns the
    machine's speed from the plans that run to their end, and a plan it predicts at more than
    :data:`~mcgs.cost_model.UNSEEN_FAMILY_MARGIN` times its part is not run there (it would only
    spend the part timing out) but goes straight to the low pass.

    The low pass takes the plans out of time or memory (or sent there) in the knowledge base's
    order of their model entries (boosted trees before the rest on a table: the order drafts
    follow when nothing is known) and gets what is left of the share, at least
    :data:`LOW_PASS_SHARE` of it, so screening takes at most ``(1 + LOW_PASS_SHARE) *
    time_share_s``. Each plan's limit there is the larger of the full pass's part and
    :data:`~mcgs.cost_model.UNSEEN_FAMILY_MARGIN` times the larger of its prior and its
    calibrated prediction; a plan predicted above what is left is not run, so the time goes to
    plans that can finish.

    Raises:
        KeyboardInterrupt: ``cancel`` was set (the caller's stop).
    """
    from mcgs.operators.code_review import review_program

    results = [PlanResult(answer=a) for a in plans]
    per_plan = min(timeout_s, max(5.0, time_share_s / max(1, len(plans))))
    limits = dict(memory_mb=memory_mb, cpu_threads=threads, isolation=isolation, disk_mb=disk_mb)
    full = _Fidelity(screen, folder, max_output_bytes)
    full_share = _share_of(screen.n_train, costs)
    reviewed: dict[int, str] = {}  # plan -> the program the Code Review passed
    sent_low: list[int] = []  # plans predicted too slow for the full pass
    start = time.monotonic()
    for i, res in enumerate(results):
        left = time_share_s - (time.monotonic() - start)
        if left < 5:
            break
        review = review_program(res.answer.code, train_only_columns=train_only_columns)
        if review.rejected:
            res.state, res.error = "rejected", "; ".join(review.reasons)
            continue
        reviewed[i] = review.code
        expected = _predicted_s(costs, res.answer.config, full_share)
        if expected is not None and expected[0] > UNSEEN_FAMILY_MARGIN * per_plan:
            res.error = f"predicted {expected[0]:.0f}s on {screen.n_train} rows against {per_plan:.1f}s a plan"
            sent_low.append(i)
            continue
        full.run(res, i, review.code, dict(limits, timeout_s=min(per_plan, left)), cancel)
        _observe(costs, res, full_share)
    slow = [i for i, r in enumerate(results) if r.state in ("timeout", "oom") or i in sent_low]
    left = max(time_share_s - (time.monotonic() - start), LOW_PASS_SHARE * time_share_s)
    _low_pass(results, slow, reviewed, screen, folder, left, per_plan, dict(limits, timeout_s=timeout_s), costs, cancel, max_output_bytes)
    return results


def _low_pass(results, slow, reviewed, screen, folder, seconds, per_plan, limits, costs, cancel, max_output_bytes) -> None:
    """Screen the ``slow`` plans (indices into ``results``) again on :data:`LOW_FIDELITY_SHARE`
    of the screening rows within ``seconds``, as :func:`run_screen` says; ``limits['timeout_s']``
    caps each run."""
    low_rows = max(LOW_FIDELITY_MIN_ROWS, int(screen.n_train * LOW_FIDELITY_SHARE))
    if not slow or low_rows >= screen.n_train:
        return
    slow = sorted(slow, key=lambda i: _priority(results[i].answer.config))  # stable: the coder's order among equals
    deadline = time.monotonic() + seconds
    low = None
    for i in slow:
        res, left = results[i], deadline - time.monotonic()
        if left < 5:
            break
        low = low or _Fidelity(build_screen_task(screen, folder / "task_low", low_rows, seed=0), folder / "low", max_output_bytes)
        share = _share_of(low.spec.n_train, costs)
        expected = _predicted_s(costs, res.answer.config, share)
        if expected is not None and expected[0] > left:
            note = f"predicted {expected[0]:.0f}s on {low.spec.n_train} rows, more than the {left:.0f}s of screening left"
            res.error = f"{res.error}; {note}" if res.error else note
            continue
        # a family's first run: twice the larger of its prior and its prediction (the calibration
        # learnt from other families can lower its prediction by their errors)
        limit = per_plan if expected is None else max(per_plan, UNSEEN_FAMILY_MARGIN * max(expected))
        res.slow = True
        low.run(res, i, reviewed[i], dict(limits, timeout_s=min(limit, left, limits["timeout_s"])), cancel)
        _observe(costs, res, share)


def _share_of(rows: int, costs: "CostModel | None") -> float:
    """``rows`` as a share of the task's training rows (the cost model's fidelity)."""
    n = (costs.profile.get("n_train") or 0) if costs is not None else 0
    return min(1.0, rows / n) if n else 1.0


def _predicted_s(costs: "CostModel | None", config: dict[str, Any] | None, fidelity: float) -> tuple[float, float] | None:
    """``(calibrated prediction, prior)`` of a plan's recipe config at ``fidelity``, seconds;
    None for a program without one (an LLM's)."""
    if costs is None or not config or not config.get("model"):
        return None
    try:
        return costs.predict_s(config, fidelity), costs.prior_s(config, fidelity)
    except (KeyError, TypeError, ValueError):
        return None


def _observe(costs: "CostModel | None", res: PlanResult, fidelity: float) -> None:
    """Let the cost model learn the machine's speed from a plan that ran to its end."""
    if costs is not None and res.state in ("valid", "buggy", "invalid_output") and res.runtime_s > 0:
        try:
            costs.observe(res.answer.config or {}, res.runtime_s, fidelity)
        except (KeyError, TypeError, ValueError):
            pass


def _priority(config: dict[str, Any] | None) -> int:
    """The knowledge base's draft priority of a plan's model entry (lower first); plans without
    one (an LLM's) after those with one."""
    from mcgs.knowledge_base import get_entry

    try:
        entry = get_entry((config or {})["model"])
    except KeyError:
        return 99
    return entry.recipe.priority if entry.recipe else 99


class _Fidelity:
    """One screening subsample: its prepared input, its labels, and how a plan is run on it."""

    def __init__(self, spec: TaskSpec, folder: Path, max_output_bytes: int | None):
        from mcgs.contract import prepare_run_input
        from mcgs.evaluation import TaskLabels

        self.spec, self.folder, self.max_output_bytes = spec, folder, max_output_bytes
        self.input = prepare_run_input(spec, folder)
        self.labels = TaskLabels.load(spec, self.input / "folds.csv")

    def run(self, res: PlanResult, i: int, code: str, limits: dict[str, Any], cancel: threading.Event | None) -> None:
        """Run plan ``i`` (``code``: its reviewed program) here and record the outcome in ``res``.

        Raises:
            KeyboardInterrupt: ``cancel`` was set.
        """
        from mcgs.candidate_files import remove_tree
        from mcgs.contract import prepare_workspace
        from mcgs.evaluation import OutputError, evaluate_workspace
        from mcgs.sandbox import Outcome, SandboxLimits, run_program

        ws = prepare_workspace(self.input, self.folder / f"plan_{i}", code)
        out = run_program(ws, "solution.py", SandboxLimits(**limits), extra_env={"MCGS_SEED": str(i)}, cancel=cancel)
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt("stop requested")
        res.runtime_s, res.rows, res.score = out.runtime_s, self.spec.n_train, None
        res.state = out.outcome.value if out.outcome is not Outcome.OK else "valid"
        res.error = out.error
        if out.outcome is Outcome.OK:
            try:
                cap = {"max_bytes": self.max_output_bytes} if self.max_output_bytes else {}
                res.score = float(evaluate_workspace(self.labels, ws, **cap).score)
            except OutputError as exc:
                res.state, res.error = "invalid_output", str(exc)
        with contextlib.suppress(OSError):
            remove_tree(ws / "working")


def rank_plans(results: list[PlanResult], higher_is_better: bool) -> list[PlanResult]:
    """Order screened plans for drafting.

    First the best plan valid on the full screening subsample, after any slow plan that beat its
    score on fewer rows; then the slow plans (out of time or memory there: costly, not wrong --
    a strong but slow model, or any model on a busy machine, must not lose its draft to weak
    fast ones): those valid on the lower-fidelity subsample by their score there, then those it
    could not judge either, and the plans never run, in the coder's order (the knowledge base's
    priority for the recipe coder); then the other full-subsample plans by score (ties: faster
    first); then failed ones (buggy, invalid output, rejected by the Code Review). Scores of
    different fidelities are compared only one way: a plan better on fewer rows is taken to be
    better on more (learning curves rise with the rows), never the reverse. All stay in the
    queue: the search may want more drafts than there are good plans.
    """
    def by_score(plans):
        return sorted(plans, key=lambda r: (best_first(r.score, higher_is_better), r.runtime_s))

    def scored(r):
        return r.state == "valid" and r.score is not None and math.isfinite(r.score)

    full = by_score([r for r in results if scored(r) and not r.slow])
    slow_valid = by_score([r for r in results if scored(r) and r.slow])
    unknown = [r for r in results if r.state in ("skipped", "timeout", "oom")]
    failed = [r for r in results if r not in full and r not in slow_valid and r not in unknown]
    # a plan that beats the best full-subsample plan on fewer rows is taken to beat it on more
    # (a learning curve rises with the rows); only this one-sided comparison crosses fidelities
    ahead = [r for r in slow_valid if full and best_first(r.score, higher_is_better) < best_first(full[0].score, higher_is_better)]
    return ahead + full[:1] + [r for r in slow_valid if r not in ahead] + unknown + full[1:] + failed


def save_plans(path: Path, ranked: list[PlanResult], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**meta, "plans": [r.to_json() for r in ranked]}, indent=2))
    os.replace(tmp, path)


def load_plans(path: Path) -> tuple[list[PlanResult], dict[str, Any]]:
    data = json.loads(path.read_text())
    return [PlanResult.from_json(d) for d in data.pop("plans")], data


class PlanQueue:
    """A run's screened draft plans, best first: Draft takes them before asking the coder.

    Args:
        search: The search whose drafts the plans become.
    """

    def __init__(self, search):
        self.search = search
        self.plans: list[PlanResult] = []

    @property
    def path(self) -> Path:
        """``RUN_DIR/screen/plans.json``: the stored ranking."""
        return self.search.run_dir / "screen" / "plans.json"

    def __bool__(self) -> bool:
        return bool(self.plans)

    def prepare(self) -> None:
        """Write ``plan_candidates`` draft plans, screen them on a row subsample, and queue them
        best first. On resume, the stored ranking is reused and plans already drafted are
        skipped; with no screening (``plan_candidates=0``, drafts already made, or too little
        budget) the queue stays empty."""
        from mcgs.node import NodeState, Operator

        search = self.search
        k = search.settings.plan_candidates
        drafted = sum(n.operator is Operator.DRAFT for n in search.nodes())
        if self.path.is_file():
            ranked, _ = load_plans(self.path)
            self.plans = ranked[drafted:]
            return
        if k <= 0 or drafted > 0:
            return
        if search.task.media is not None or search.task.forecast is not None:  # a handful of plans, each a different kind
            kind = "an image task" if search.task.media is not None else "a forecasting task"
            search.say(f"not screening draft plans: {kind} has a few, each of a different kind; they are drafted in turn")
            return
        if search.experience is not None and len(search.experience.runs) >= 2 and len(search.experience.family_ranks) >= 3:
            search.say("not screening draft plans: earlier runs on similar data order them (mcgs.experience)")
            return
        from mcgs.node import FrozenNode
        from mcgs.operators import OperatorContext, build_request
        from mcgs.branches import Expansion

        g = search.graph()
        root = next(n for n in search.nodes() if n.parent_id is None)
        plans: list[CoderAnswer] = []
        stubs: list = []
        for i in range(k):
            ctx = OperatorContext(graph=g, task=search.task, profile=search.profile, settings=search.settings, seed=search.settings.seed * 100_003 + 1 + i)
            req = dataclasses.replace(build_request(ctx, Expansion(parent_id=root.id, operator=Operator.DRAFT, reason="plan")), siblings=tuple(stubs))
            answer = search.coder.write(req)
            model = (answer.config or {}).get("model")
            if any(a.code == answer.code or (model and (a.config or {}).get("model") == model) for a in plans):
                break  # the coder has no new plan (a recipe coder repeats a model family)
            plans.append(answer)
            stubs.append(FrozenNode(id=-1 - i, seq=-1 - i, parent_id=root.id, operator=Operator.DRAFT, state=NodeState.PENDING, config=answer.config, plan=answer.plan))
        self._screen(plans)

    def _screen(self, plans: list[CoderAnswer]) -> None:
        search = self.search
        share = search.settings.screen_share * search.clock.remaining
        if share < 5.0 * len(plans):
            search.say(f"skipping plan screening (a quick trial of each of the {len(plans)} draft plans on a subsample of the rows): "
                       f"it needs at least 5 s a plan and this budget leaves it {share:.0f} s; the plans are drafted in the order the coder proposed them")
            return
        folder = search.run_dir / "screen"
        screen = build_screen_task(search.task, folder / "task", screen_rows_for(search.task.n_train, search.settings.screen_rows),
                                   search.settings.seed)
        t0 = time.monotonic()
        results = run_screen(
            plans, screen, folder, timeout_s=search.settings.screen_timeout_s, time_share_s=share, threads=max(1, search.settings.cpu_threads),
            memory_mb=search.settings.memory_mb, cancel=search.stop_event, train_only_columns=search.profile.get("train_only_columns", ()),
            isolation=search.isolation, disk_mb=search.disk.cap_mb(), max_output_bytes=search.max_output_bytes, costs=run_cost_model(search),
        )
        ranked = rank_plans(results, search.task.higher_is_better)
        save_plans(self.path, ranked, {"rows": screen.n_train, "seconds": round(time.monotonic() - t0, 1)})
        search.say(f"screened {sum(r.state != 'skipped' for r in ranked)} of {len(ranked)} draft plans on {screen.n_train} rows; drafting best first:")
        for r in ranked:
            model = r.answer.config.get("model", "?") if r.answer.config else "?"
            at = f" on {r.rows} rows" if r.slow and r.rows else ""
            why = f": {r.error}" if r.state == "skipped" and r.error else ""
            search.say(f"  plan {model}: {'slow, ' if r.slow else ''}{r.state}{f' {r.score:.5g}' if r.score is not None else ''}{at} ({r.runtime_s:.1f}s){why}")
        self.plans = ranked

    def pop(self) -> CoderAnswer:
        """The best remaining screened plan, its screening result noted in the plan text."""
        r = self.plans.pop(0)
        metric = self.search.task.metric
        if r.score is None:
            note = f"screening: {r.state}"
        else:
            slow = ", after running out of time on more rows" if r.slow else ""
            note = f"screened: {metric} {r.score:.5g} on a subsample of {r.rows} rows{slow} in {r.runtime_s:.0f}s"
        return dataclasses.replace(r.answer, plan=f"({note}) {r.answer.plan}")
