"""The search loop: select -> code -> run -> evaluate -> persist -> backpropagate.

:class:`Search` drives one run stored in ``RUN_DIR`` (``mcgs.db`` + ``nodes/<seq>/``
workspaces + ``best/``). It holds no algorithm of its own: selection and reward live in
:mod:`mcgs.policy`, requests in :mod:`mcgs.operators`, programs in the coder, execution in
:mod:`mcgs.sandbox`, scoring in :mod:`mcgs.evaluation`. Everything is written to storage as it
happens, so a run stopped for any reason resumes with :func:`mcgs.load_search` (:func:`open_search` here).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import threading
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence


from mcgs.best_folder import write_best
from mcgs.forecast_mode import finish_forecast, forecast_labels
from mcgs.budget import Budget, StopReason
from mcgs.coders import Coder, CoderStop
from mcgs.contract import prepare_run_input
from mcgs.experience import contribute
from mcgs.gpus import gpu_pool_for
from mcgs.disk import DiskGuard
from mcgs.evaluation import TaskLabels
from mcgs.expansion import launch
from mcgs.execution import (
    begin,
    next_candidate,
    execute,
    heartbeat,
    prepare_node_workspace,
    search_in_parallel,
    search_serially,
    work,
)
from mcgs.final_choice import final_node
from mcgs.graph import best_node
from mcgs.node import FrozenNode, NodeState, RunStatus
from mcgs.operators.draft import run_baseline
from mcgs.operators.ensemble import FINAL_REASON, EnsembleState, build_ensemble, final_ensemble_is_current
from mcgs.policy import policy_for
from mcgs.profile import profile_task
from mcgs.run_folder import (
    BASELINE_NAME,
    DB_NAME,
    STORAGE_NAME,
    RunError,
    check_new_run,
    default_storage_url,
    locate_run,
    open_storage,
    safe_url,
)
from mcgs.run_graph import LiveGraph
from mcgs.sandbox import ExecutionResult, SandboxLimits, shared_monitor
from mcgs.fidelity import FidelityData
from mcgs.screening import PlanQueue
from mcgs.settings import SearchSettings
from mcgs.snapshot import nodes_dataframe, read_snapshot
from mcgs.storage import RunRecord, Storage, owner_id
from mcgs.verdicts import judge, record_verdict, save_progress
from mcgs.task import TaskError, TaskSpec, data_fingerprint, load_task

__all__ = ["Search", "create_search", "open_search", "RunError", "DB_NAME", "IMAGE_NODE_TIMEOUT_SHARE"]

#: ``node_timeout_share`` of an image task's run when the settings leave it out: a network's
#: program trains for the time it is given (MCGS_TIME_LIMIT_S), and its score grows with the
#: epochs, so one candidate may take half the run rather than a quarter.
IMAGE_NODE_TIMEOUT_SHARE = 0.5

logger = logging.getLogger(__name__)

_PACKAGES = ("mcgs", "numpy", "pandas", "scikit-learn", "lightgbm", "catboost", "sqlalchemy", "networkx", "anthropic", "openai")
Callback = Callable[["Search", FrozenNode], None]




def _package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


class Search:
    """One search run over a task, persisted in ``run_dir``: the facade over the engine.

    Use :func:`mcgs.create_search` or :func:`mcgs.load_search` rather than the constructor. The
    search selects (:mod:`mcgs.policy`), writes (the coder, through :mod:`mcgs.operators`),
    reviews, scores and stores; where candidates run is :mod:`mcgs.execution`'s (or the
    caller's, through :meth:`ask` and :meth:`tell`).

    Args:
        run_dir: The run directory.
        storage: Its storage.
        run: The run record.
        task: The task.
        settings: Search settings (budgets and constants).
        coder: Who writes the programs.
        callbacks: Called as ``callback(search, node)`` after each node finishes (a single
            function is taken as a list of one). An exception a callback raises stops the run
            like Ctrl-C would (status ``stopped``, every finished node kept; ``run`` again
            resumes it) and propagates to the caller of :meth:`run`.
        read_only: Only read the run (report, export): nothing is written to its folder or
            storage, no trial sandbox runs, and the task's own data folder is not needed
            (labels come from the run's ``input/`` copy).
    """

    def __init__(self, run_dir: Path, storage: Storage, run: RunRecord, task: TaskSpec, settings: SearchSettings, coder: Coder,
                 callbacks: Sequence[Callback] = (), read_only: bool = False):
        self.run_dir, self.storage, self.run_record, self.task = run_dir, storage, run, task
        self.settings, self.coder, self.read_only = settings, coder, read_only
        self.callbacks = [callbacks] if callable(callbacks) else list(callbacks)
        if read_only:
            self.input_dir = run_dir / "input"
            if not (self.input_dir / "task.json").is_file():
                raise RunError(f"{self.input_dir} is missing or incomplete: the run's copy of its task is gone; restore it from a copy of the run")
        else:
            self.input_dir = prepare_run_input(task, run_dir, settings.weights_dir)
        self.profile = load_profile(task, run_dir, self.input_dir, read_only)
        self._labels: TaskLabels | None = None
        self.rng = random.Random(f"mcgs-{settings.seed}-{run.id}")  # the policy's draws
        self.policy = policy_for(settings)  # the strategy that selects (mcgs.policy); may be replaced
        self.budget = Budget(lambda: self.settings, run.elapsed_s)
        self.stop_reason: StopReason | None = None  # why the search stopped starting candidates
        self._stop = threading.Event()
        self.ensemble_state = EnsembleState()
        self.plans = PlanQueue(self)  # screened draft plans, best first (multi-plan drafting)
        self.fidelity = FidelityData(self)  # the input and labels of each fidelity (successive halving)
        self.say: Callable[[str], None] = logger.info  # one-line messages for the user (the CLI prints them)
        self.verdict_lock = threading.RLock()  # one verdict at a time (mcgs.verdicts)
        self._coder_stop: str | None = None  # the coder's message when it asked the run to stop (LLM budget)
        self._lost_said: set[int] = set()  # nodes whose lost artifacts were reported (final_node)
        self.owner = owner_id()  # this process, as the holder of node claims
        self.is_worker = False  # True while :meth:`work` runs: no run-level writes (status, export)
        self._live = LiveGraph(lambda: self.storage, run.id)
        self._session = None  # (engine lock, heartbeat) while ask/tell drive the run
        self.disk = DiskGuard(run_dir, storage, run.id, self.budget.clock, self._stop, lambda msg: self.say(msg), lambda: self.settings,
                              read_only=read_only)
        self._isolation: str | None = None
        self.executor = None  # where candidates run (mcgs.executors), opened by mcgs.execution.executor_of
        self.experience = None  # what earlier runs on similar data say (mcgs.experience.prepare_experience)
        # the GPUs and which running candidate holds which; a --gpus index the machine lacks fails here
        self.gpu_pool = gpu_pool_for(settings.gpus if not read_only else "none", settings.candidates_per_gpu)
        if read_only:  # resolved when node code first runs (export's measurements)
            return
        self.isolation  # noqa: B018 - fail at once when the run's isolation is not available here
        storage.on_full = self.disk.wait_for_space
        if hasattr(coder, "attach"):  # the LLM coder writes its calls to this run's ledger
            coder.attach(storage, run.id, lambda: self.clock.remaining)

    # ------------------------------------------------------------------ state

    @property
    def run_id(self) -> int:
        return self.run_record.id

    @property
    def clock(self):
        """The run's wall clock (:class:`mcgs.budget.Clock`): ``elapsed``, ``remaining``, ``budget_s``."""
        return self.budget.clock

    @property
    def stop_message(self) -> str | None:
        """Why the search stopped starting candidates, in words (the coder's own message when
        it stopped the run), or None while it has not."""
        return self._coder_stop if self.stop_reason is StopReason.CODER else (self.stop_reason.value if self.stop_reason else None)

    @property
    def isolation(self) -> str:
        """The isolation candidates run with: the run's stored level, checked to work here
        (:func:`mcgs.sandbox.resolve_isolation`).

        Raises:
            RunError: it needs bubblewrap, which is missing or cannot create namespaces here.
        """
        if self._isolation is None:
            from mcgs.sandbox import resolve_isolation

            try:  # a resumed run keeps the level it recorded
                self._isolation = resolve_isolation(self.settings.isolation)
            except ValueError as exc:
                raise RunError(str(exc)) from exc
        return self._isolation

    @property
    def labels(self) -> TaskLabels:
        """What the engine scores with, read once: the labels, folds and sample submission of the run's ``input/`` copy."""
        if self._labels is None:
            inp = self.task.model_copy(update={"data_dir": self.input_dir})
            self._labels = forecast_labels(self.run_dir, self.task) if self.task.forecast else TaskLabels.load(inp, self.input_dir / "folds.csv")
        return self._labels

    @property
    def stop_event(self) -> threading.Event:
        """Set once a stop is requested (running candidates are killed when it is)."""
        return self._stop

    @property
    def stop_requested(self) -> bool:
        """True once :meth:`request_stop` was called."""
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Ask a running search to stop (thread- and signal-safe): the running candidate is
        killed and recorded INTERRUPTED, and :meth:`run` raises KeyboardInterrupt."""
        self._stop.set()

    def warn(self, message: str) -> None:
        """Say a warning once: through :attr:`say` when a caller set it (the CLI prints it),
        else as a logged warning."""
        (logger.warning if self.say == logger.info else self.say)(message)

    @property
    def max_output_bytes(self) -> int:
        """Cap on one file read or copied out of a workspace, bytes (setting ``max_output_mb``)."""
        return int(self.settings.max_output_mb * 2**20)

    def record_llm_call(self, operator: str, kind: str, usage) -> None:
        """Add a language-model call made for this run outside its coder (``mcgs run --prompt``
        reading a request) to the run's cost ledger: ``operator`` it served (``"request"``), the
        ledger's ``kind``, and its :class:`mcgs.llm.client.CallUsage` (model, tokens, latency)."""
        from mcgs.coders.anthropic import ledger_row

        self.storage.add_llm_call(self.run_id, ledger_row(self.settings.llm, operator, kind, usage.model, usage, provider=self.settings.coder))

    def sandbox_limits(self, timeout_s: float, threads: int | None = None) -> SandboxLimits:
        """The limits every run of this run's node code gets (search, ensembles, export's
        measurements): ``timeout_s`` (at least 1 s), the memory limit, the disk cap, the
        candidate's share of the CPU threads, no more than the cores other processes leave
        free (:func:`mcgs.sandbox.shared_monitor`), or ``threads``; and the run's isolation."""
        return SandboxLimits.for_run(self.settings, timeout_s, isolation=self.isolation, disk_mb=self.disk.cap_mb(), threads=threads,
                                     free_cores=shared_monitor().free())

    # ------------------------------------------------------------------ views

    def nodes(self) -> list[FrozenNode]:
        """All nodes of the run, in creation order, as storage holds them now (read
        incrementally: :class:`~mcgs.storage.RunView`)."""
        return self._live.nodes()

    def graph(self):
        """The search graph built from storage alone, brought up to date in place for the
        calling thread (:class:`mcgs.run_graph.LiveGraph`). Callers must not modify it."""
        return self._live.graph()

    def nodes_dataframe(self):
        """The run's nodes as a pandas DataFrame (:func:`mcgs.snapshot.nodes_dataframe`)."""
        return nodes_dataframe(self.nodes())

    def snapshot(self, details: bool = False):
        """The run as its storage holds it now, frozen (:class:`mcgs.snapshot.RunSnapshot`).

        Args:
            details: Read every node's program and output tails too.
        """
        return read_snapshot(self.storage, self.run_dir, self.run_record.name, details=details)

    @property
    def best_node(self) -> FrozenNode | None:
        """The valid node with the best engine score (task direction), or None."""
        return best_node(self.graph(), self.task.higher_is_better)

    @property
    def final_node(self) -> FrozenNode | None:
        """The node the run hands in now (:func:`mcgs.final_choice.final_node`): the best single
        node or an ensemble, never one whose artifacts are lost; None when no valid node exists."""
        return final_node(self, self._lost_said)

    def node_dir(self, node: FrozenNode) -> Path:
        """The workspace of ``node``: ``RUN_DIR/nodes/<seq, five digits>``."""
        return self.run_dir / "nodes" / f"{node.seq:05d}"

    def node_seed(self, node: FrozenNode) -> int:
        """``MCGS_SEED`` of ``node``'s program: the run's seed x 100 003 + the node's number."""
        return self.settings.seed * 100_003 + node.seq

    # ------------------------------------------------------------------ run

    def run(self, time_budget: str | float | None = None, workers: int | None = None, max_nodes: int | None = None) -> FrozenNode | None:
        """Search until the time or node budget is spent, then build the final ensemble.

        Args:
            time_budget: The run's total wall budget (seconds, or ``"10m"``, ``"2h"``); default
                the stored one. Time already spent counts against it.
            workers: Candidates to run at once in this process; default the stored setting.
            max_nodes: Stop searching after this many finished nodes (the final ensemble, built
                after them, is not counted); default the stored setting.
            (Given values are stored with the run, so a later resume keeps them.)

        Returns:
            The final node (see :attr:`final_node`), or None when no valid node was found.

        Raises:
            KeyboardInterrupt: after recording the running candidate as INTERRUPTED and the
                run as ``stopped`` (resume with :func:`mcgs.load_search`).
            ValueError: a budget or worker count that is not positive.
            RunError: another live process is searching this run (one engine per run folder,
                :mod:`mcgs.engine_lock`); nothing is changed.
        """
        lock = begin(self, time_budget, workers, max_nodes)
        try:
            try:
                with heartbeat(self, clock=True):
                    self._search_loop()
                self._final_ensemble()
            except BaseException:
                self._record_stop()
                raise
            return self._finish()
        finally:
            lock.close()

    def _search_loop(self) -> None:
        """The baseline, the draft-plan screening, then expansions until a budget is spent, in
        this thread or on ``workers`` threads (:mod:`mcgs.execution`)."""
        run_baseline(self)
        self.plans.prepare()
        (search_in_parallel if self.settings.workers > 1 else search_serially)(self)

    def _final_ensemble(self) -> None:
        if self.settings.ensemble and not final_ensemble_is_current(self.nodes()):
            self.storage.update_run(self.run_id, status=RunStatus.ENSEMBLING)  # `mcgs worker`s start no new node
            self.build_ensemble()

    def _record_stop(self) -> None:
        """The run is stopping on an exception (Ctrl-C, a callback's error): its running nodes
        are interrupted and the run stored ``stopped``, as far as the storage can be written."""
        from mcgs.storage import StorageError

        try:
            self.storage.interrupt_unfinished(self.run_id, owner=self.owner)
            save_progress(self, status=RunStatus.STOPPED)
        except StorageError as exc:  # a full disk, say: the lock's release tells status the engine is gone
            logger.warning("could not record the stop: %s", exc)

    def _finish(self) -> FrozenNode | None:
        final = self.final_node
        if final is not None:
            self.export_best(final)
            if self.task.forecast is not None:
                finish_forecast(self, final)
        save_progress(self, status=RunStatus.FINISHED)
        contribute(self)  # what the run learned, for the next runs on similar data (mcgs.experience)
        return final

    def work(self, drain: bool = False) -> int:
        """Take part in a run as one more worker (``mcgs worker``): :func:`mcgs.execution.work`.

        Returns:
            How many nodes this worker finished.
        """
        return work(self, drain=drain)

    def budget_exhausted(self, in_flight: int = 0) -> StopReason | None:
        """Why no new candidate may start now (``in_flight`` candidates of this process count
        against the node budget), or None: :meth:`mcgs.budget.Budget.exhausted`, or the coder
        asked the run to stop (its LLM budget)."""
        if self._coder_stop:
            return StopReason.CODER
        return self.budget.exhausted(self.nodes, in_flight)

    def coder_stopped(self, exc: CoderStop) -> None:
        """Record that the coder asked the run to stop (its LLM budget): no candidate starts
        after it, and the summary shows its message."""
        self._coder_stop = str(exc)

    # ------------------------------------------------------------------ one expansion

    def step(self) -> FrozenNode:
        """Expand one node: select, write, review, run, evaluate, persist. Returns the
        finished node. With ``policy="mcgs"``, an ensemble node is built first whenever
        ``ensemble_every`` new valid nodes have appeared since the last one."""
        launched = self.launch()
        if launched is None:
            return self.nodes()[-1]
        return execute(self, *launched)

    def launch(self) -> tuple[FrozenNode, float, int] | None:
        """Claim a queued node, or select, write, review and store the next one: what an
        executor runs next (:func:`mcgs.expansion.launch`)."""
        return launch(self)

    # ------------------------------------------------------------------ ask / tell

    def ask(self) -> FrozenNode | None:
        """The next node for the caller to run, Optuna's ask: selected, written, reviewed and
        stored like any node, claimed by this process, its workspace ready.

        Run ``python solution.py`` in :meth:`node_dir` with ``MCGS_SEED`` set to
        :meth:`node_seed` (as the sandbox would, or your own way: a cluster, another executor),
        then hand the outcome to :meth:`tell`; the engine scores the node's out-of-fold
        predictions itself. The first call takes the engine lock (one engine per run) and
        :meth:`finish` or :meth:`stop` gives it back. In-search ensembles (policy ``mcgs``)
        are built and run by the engine within a call.

        Returns:
            The PENDING node (its ``code`` is the program), or None when a budget is spent
            (:attr:`stop_reason` says which): call :meth:`finish`.

        Raises:
            RunError: another live process is searching this run.
        """
        if self._session is None:
            lock = begin(self)
            beat = heartbeat(self, clock=True)
            beat.__enter__()
            self._session = (lock, beat)
        while True:
            launched = next_candidate(self)
            if launched is None:
                return None
            node = launched[0]
            _, problem = prepare_node_workspace(self, node)
            if problem is None:
                return self.storage.get_node(node.id)
            record_verdict(self, node, NodeState.INVALID_OUTPUT, None, problem, None)

    def tell(self, node: FrozenNode, result: ExecutionResult) -> FrozenNode:
        """Score and store what running an asked node's program gave (Optuna's tell).

        Args:
            node: A node from :meth:`ask`.
            result: How its run ended (:class:`mcgs.sandbox.ExecutionResult`: ``outcome``
                ``OK`` when the program exited cleanly, runtime, output tails, the error);
                the engine reads the node's predictions from its workspace and scores them.

        Returns:
            The finished node: ``valid`` with its engine score, or the failure.
        """
        return judge(self, node, result)

    def finish(self) -> FrozenNode | None:
        """End an ask/tell run: build the final ensemble, write ``best/``, store the run
        ``finished`` and give the engine lock back. Returns the node the run hands in."""
        try:
            self._final_ensemble()
            return self._finish()
        finally:
            self._end_session()

    def stop(self) -> None:
        """Stop the search: :meth:`request_stop` for :meth:`run`; an ask/tell run records its
        unfinished nodes interrupted (queued again on resume), is stored ``stopped`` and gives
        the engine lock back."""
        self.request_stop()
        if self._session is not None:
            self._record_stop()
            self._end_session()

    def _end_session(self) -> None:
        if self._session is not None:
            lock, beat = self._session
            self._session = None
            beat.__exit__(None, None, None)
            lock.close()

    # ------------------------------------------------------------------ ensembles and best/

    def build_ensemble(self, reason: str = FINAL_REASON) -> FrozenNode | None:
        """Add an ensemble node over the best valid nodes and run it
        (:func:`mcgs.operators.ensemble.build_ensemble`); None when fewer than two nodes are
        worth combining."""
        return build_ensemble(self, reason)

    def export_best(self, node: FrozenNode | None = None) -> Path | None:
        """Write ``best/`` for a node (default the best one; :func:`mcgs.best_folder.write_best`),
        pausing while the disk is full.

        Returns:
            The ``best`` folder, or None when there is no valid node.
        """
        node = node or self.best_node
        if node is None:
            return None

        def write() -> Path:
            return write_best(self.run_dir, self.input_dir, node, {n.id: n for n in self.nodes()}, self.node_dir, self.task, self.max_output_bytes)

        return self.disk.with_space(write, self.run_dir / "best")


def load_profile(task: TaskSpec, run_dir: Path, input_dir: Path, read_only: bool) -> dict[str, Any]:
    """The task's data profile: ``RUN_DIR/profile.json``, else computed (and stored, unless
    ``read_only``: then from the run's input copy)."""
    path = run_dir / "profile.json"
    if path.is_file():
        return json.loads(path.read_text())
    if read_only:
        return profile_task(task.model_copy(update={"data_dir": input_dir}))
    prof = profile_task(task)
    if (input_dir / "weights").is_dir():  # the pretrained backbones a program may load (a setting, not the data)
        prof["pretrained_weights"] = sorted(p.stem for p in (input_dir / "weights").glob("*.pth"))
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # workers may open a new run at once
    tmp.write_text(json.dumps(prof, indent=2))
    os.replace(tmp, path)
    return prof


def resolve_coder_name(settings: SearchSettings) -> str:
    """``recipe``, ``anthropic`` or ``openai``: ``auto`` means anthropic when ``ANTHROPIC_API_KEY`` is set."""
    if settings.coder != "auto":
        return settings.coder
    return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "recipe"


def _default_coder(settings: SearchSettings) -> Coder:
    """The coder named by the settings (resolved once at run creation and stored)."""
    from mcgs.coders.recipe import RecipeCoder

    recipe = RecipeCoder(seed=settings.seed, models=settings.recipe_models)
    name = resolve_coder_name(settings)
    if name == "simulated":
        from mcgs.coders.simulated import SimulatedCoder

        return SimulatedCoder(seed=settings.seed, fault_rate=settings.simulated_fault_rate, repair_rate=settings.simulated_repair_rate,
                              review_rate=settings.simulated_review_rate, models=settings.recipe_models)
    if name in ("anthropic", "openai"):
        from mcgs.coders.anthropic import AnthropicCoder

        return AnthropicCoder(settings, fallback=recipe, provider=name)
    return recipe


def _with_tracking(callbacks, settings: SearchSettings) -> list:
    """``callbacks``, plus the MLflow callback when the settings name a tracking URI
    (``mlflow_tracking_uri``: the run keeps logging when it is resumed)."""
    callbacks = [callbacks] if callable(callbacks) else list(callbacks)
    if settings.mlflow_tracking_uri:
        from mcgs.integrations import MLflowCallback

        callbacks.append(MLflowCallback(settings.mlflow_tracking_uri, experiment=settings.mlflow_experiment))
    return callbacks


def create_search(
    task: str | Path | TaskSpec,
    run_dir: str | Path,
    *,
    settings: SearchSettings | None = None,
    coder: Coder | None = None,
    callbacks: Sequence[Callback] = (),
    baseline: str | Path | None = None,
    storage: str | None = None,
) -> Search:
    """Create a new run in ``run_dir`` (which must not hold a run yet).

    Args:
        storage: SQLAlchemy URL of the storage, e.g. ``postgresql+psycopg://host/db`` for
            workers on several machines; default ``sqlite:///RUN_DIR/mcgs.db``. The run is named
            after ``run_dir`` and its artifacts (workspaces, predictions) stay in ``run_dir``.
        baseline: A starter program following the solution contract; it is copied to
            ``RUN_DIR/baseline.py`` and run as the first node, and the search builds from it
            (MLAgentBench-style improvement).

    Raises:
        TaskError: the task folder is invalid.
        RunError: ``run_dir`` already holds a run (use :func:`mcgs.load_search` to resume it), or
            the baseline file does not exist.
    """
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    settings = settings or SearchSettings()
    if coder is None and settings.coder == "auto":  # store what "auto" meant, so resume agrees
        settings = settings.model_copy(update={"coder": resolve_coder_name(settings)})
    from mcgs.sandbox import resolve_isolation

    try:
        settings = settings.model_copy(update={"isolation": resolve_isolation(settings.isolation)})
    except ValueError as exc:
        raise RunError(str(exc)) from exc
    if spec.media is not None and "node_timeout_share" not in settings.model_fields_set:
        # a network trains for as long as it is given: on an image task one candidate may take half the run
        settings = settings.model_copy(update={"node_timeout_share": IMAGE_NODE_TIMEOUT_SHARE})
    if spec.constraints.interpretable and settings.ensemble:
        # a blend of several models is not one a person can inspect
        logger.info("the task asks for an interpretable model: no ensembles")
        settings = settings.model_copy(update={"ensemble": False})
    run_dir = Path(run_dir)
    check_new_run(run_dir, spec.data_dir, baseline)
    created = not run_dir.exists()
    before = set() if created else set(run_dir.iterdir())
    run_dir.mkdir(parents=True, exist_ok=True)
    store = None
    try:
        if baseline is not None:
            shutil.copyfile(baseline, run_dir / BASELINE_NAME)
        # the data is hashed first: a reader (mcgs status) then finds the storage without a run for a moment only
        fingerprint, versions = data_fingerprint(spec), _package_versions()
        url = storage or default_storage_url(run_dir)
        store = open_storage(url)
        name = run_dir.resolve().name
        if any(r.name == name for r in store.list_runs()):
            store.close()
            raise RunError(f"{safe_url(url)} already holds a run named {name!r}; name the run folder (--out) differently")
        if url != default_storage_url(run_dir):
            (run_dir / STORAGE_NAME).write_text(json.dumps({"url": safe_url(url), "run": name}, indent=2) + "\n")
        run = store.create_run(
            name=name,
            task_json=spec.to_json(),
            settings=settings.model_dump(mode="json"),
            seed=settings.seed,
            data_fingerprint=fingerprint,
            package_versions=versions,
            isolation=settings.isolation,
        )
        return Search(run_dir, store, run, spec, settings, coder or _default_coder(settings), _with_tracking(callbacks, settings))
    except BaseException:  # a storage that does not open, bad callbacks: the folder is left as it was
        if store is not None:
            store.close()
        if created:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            for p in set(run_dir.iterdir()) - before:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        raise


def open_search(
    run_dir: str | Path,
    *,
    coder: Coder | None = None,
    callbacks: Sequence[Callback] = (),
    time_budget_s: float | None = None,
    storage: str | None = None,
    name: str | None = None,
    read_only: bool = False,
) -> Search:
    """Open an existing run to resume it, to inspect it, or to work on it (:meth:`Search.work`).

    Args:
        run_dir: The run directory (its artifacts: input copy, node workspaces).
        time_budget_s: A new total time budget; by default the stored one.
        storage: Storage URL; default ``RUN_DIR/storage.json`` when the run was created with
            another storage, else ``sqlite:///RUN_DIR/mcgs.db``.
        name: The run's name in that storage; default the only run there.
        read_only: Only to read it (``mcgs status``, ``report``, ``export``): the storage is
            opened read-only and nothing is written (:class:`Search`'s ``read_only``), so an
            archived run on a read-only mount opens; the task's data folder is not checked.

    Raises:
        RunError: no run there, or (unless read-only) its task data changed since the run started.
    """
    run_dir = Path(run_dir)
    store, run = locate_run(run_dir, storage=storage, name=name, read_only=read_only)
    spec = TaskSpec.from_json(run.task_json)
    if not read_only:
        if not spec.data_dir.is_dir():
            raise RunError(f"the task data folder {spec.data_dir} of this run no longer exists; restore it to resume")
        try:
            fp = data_fingerprint(spec)
        except (OSError, TaskError) as exc:
            raise RunError(f"cannot read the task data of this run: {exc}") from exc
        if fp != run.data_fingerprint:
            raise RunError(f"the task data in {spec.data_dir} changed since the run started (fingerprint differs); start a new run")
    from mcgs.metrics import UnknownMetricError, get_metric

    try:  # before any candidate runs: a custom metric is registered per process
        get_metric(spec.metric)
    except UnknownMetricError:
        store.close()
        raise RunError(
            f"the run's metric {spec.metric!r} is not registered in this process; call "
            f"mcgs.register_metric({spec.metric!r}, ...) as when the run was created, then load it again"
        ) from None
    stored = dict(run.settings)
    if time_budget_s is not None:
        stored["time_budget_s"] = time_budget_s
    try:
        settings = SearchSettings(**stored)
    except Exception:
        store.close()
        raise
    if read_only:  # nothing will be written: no coder that could call an API
        from mcgs.coders.recipe import RecipeCoder

        coder = coder or RecipeCoder(seed=settings.seed)
    return Search(run_dir, store, run, spec, settings, coder or _default_coder(settings), _with_tracking(callbacks, settings), read_only=read_only)
