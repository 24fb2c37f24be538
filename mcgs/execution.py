"""Where and how a run's candidates execute: the engine's loop, its worker threads, remote workers.

:class:`mcgs.search.Search` selects, writes, scores and stores; this module drives it. The
search loop runs the baseline and the draft-plan screening, then expands one node at a time
(:func:`search_serially`) or keeps ``workers`` candidates running at once on a thread pool
(:func:`search_in_parallel`: only the calling thread selects and writes programs, each worker
thread drives one sandbox process). :func:`work` is a joining worker (``mcgs worker``) on a run
whose engine lives elsewhere. Nodes are claimed through the storage with leases that a heartbeat
renews (:func:`heartbeat`); a node whose worker was lost is queued again (:func:`requeue_lost`),
and one cut short by a stop is copied and queued on resume (:func:`retry_interrupted`).

Where a claimed node's program runs is the run's executor (:mod:`mcgs.executors`: this machine's
sandbox, or a Ray task), opened by :func:`executor_of` and given back when the sitting ends.
The functions take the search they drive, as Optuna's ``_optimize`` takes its study.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
import time
from pathlib import Path

from mcgs.best_folder import copy_members, member_files
from mcgs.budget import MIN_CANDIDATE_S
from mcgs.candidate_files import CandidateFileError
from mcgs.coders import CoderStop
from mcgs.contract import prepare_workspace
from mcgs.node import EdgeKind, FrozenNode, NodeState, Operator, RunStatus
from mcgs.run_folder import RunError
from mcgs.cost_model import candidate_limit
from mcgs.experience import prepare_experience
from mcgs.sandbox import Outcome
from mcgs.settings import SearchSettings
from mcgs.verdicts import judge, record_verdict

__all__ = ["begin", "announce", "next_candidate", "search_serially", "search_in_parallel", "work", "execute", "executor_of", "close_executor",
           "prepare_node_workspace", "heartbeat", "requeue_lost", "retry_interrupted", "oversubscription"]

logger = logging.getLogger(__name__)


def begin(search, time_budget=None, workers=None, max_nodes=None):
    """Start a sitting of the engine: take the run's engine lock, store the settings given
    (a resume's new budgets), say what the run should know (:func:`announce`), kill candidates a
    killed engine left, queue again the nodes a lost worker or a stop left, and mark the run
    running.

    Returns:
        The sitting: its ``close()`` gives back the run's executor (:func:`close_executor`) and
        the engine lock (:mod:`mcgs.engine_lock`).

    Raises:
        RunError: another live process is searching this run; nothing was changed.
    """
    from mcgs.engine_lock import EngineBusy, acquire
    from mcgs.sandbox import kill_candidates
    from mcgs.settings import parse_duration

    try:
        lock = acquire(search.run_dir)
    except EngineBusy as exc:
        raise RunError(str(exc)) from None
    changes = {k: v for k, v in (("time_budget_s", None if time_budget is None else parse_duration(time_budget)),
                                 ("workers", workers), ("max_nodes", max_nodes)) if v is not None}
    try:
        if changes:
            search.settings = SearchSettings(**{**search.settings.model_dump(), **changes})
            search.budget.take_time_budget()
        # stored every time: a budget given to load_search (mcgs resume --time-budget) too
        search.storage.update_run(search.run_id, settings_json=json.dumps(search.settings.model_dump(mode="json"), default=str))
        announce(search)
        prepare_experience(search)  # what earlier runs on similar data say (mcgs.experience)
        if search.settings.executor != "local":  # connected here, in the caller's thread, before anything changes
            executor_of(search)
        orphans = kill_candidates(search.run_dir, orphans_only=True)  # left by an engine that was killed (SIGKILL)
        if orphans:
            logger.warning("killed %d candidate process(es) left running by a previous engine", orphans)
        requeue_lost(search)
        again = retry_interrupted(search)
        if again:
            search.say(f"{len(again)} node(s) interrupted earlier are queued again (the same program, no new coder call)")
        search.storage.update_run(search.run_id, status=RunStatus.RUNNING)
    except BaseException:
        _Sitting(search, lock).close()
        raise
    logger.info("run %s: budget %.0f s, %.0f s already spent", search.run_record.name, search.clock.budget_s, search.clock.elapsed_before)
    if search.clock.remaining < MIN_CANDIDATE_S:
        search.say(f"the time budget of {search.clock.budget_s:.0f} s is spent ({search.clock.elapsed_before:.0f} s used): no new candidate; "
                   f"give a larger total budget to search on (mcgs resume RUN_DIR --time-budget, or run(time_budget=...))")
    return _Sitting(search, lock)


class _Sitting:
    """A sitting of the engine, as :func:`begin` opened it; ``close()`` ends it."""

    def __init__(self, search, lock):
        self.search, self.lock = search, lock

    def close(self) -> None:
        """Give back the run's executor, then the engine lock."""
        try:
            close_executor(self.search)
        finally:
            self.lock.close()


def announce(search) -> None:
    """Say what a user should know as a sitting starts: cores oversubscribed (a warning, said
    once: the CLI prints ``say``, a library caller's log gets it), what the task loader inferred
    (a target, say), and the training columns the test file lacks (never features)."""
    for warning in oversubscription(search.settings):
        search.warn(f"warning: {warning}")
    for note in search.task.notes:
        search.say(f"note: {note}")
    train_only = list(search.profile.get("train_only_columns", ()))
    if train_only:
        shown = ", ".join(repr(c) for c in train_only[:8]) + (f" and {len(train_only) - 8} more" if len(train_only) > 8 else "")
        search.say(f"note: {len(train_only)} column(s) of the training file are not in the test file and are never features: {shown}")


def oversubscription(settings) -> list[str]:
    """Why candidates would compete for cores (each gets ``max(1, cpu_threads // workers)``
    threads): more workers than ``cpu_threads``, or more threads than this machine has. The run
    goes on; a candidate slowed by the contention may hit its time limit."""
    s, cores = settings, os.cpu_count() or 1
    out = []
    if s.workers > s.cpu_threads:
        out.append(f"{s.workers} workers with {s.cpu_threads} CPU thread(s) in all: each candidate still gets one thread, so "
                   f"{s.workers} candidates share {s.cpu_threads} and may time out; give at most as many workers as "
                   f"CPU threads (--workers, --cpu-threads)")
    if s.cpu_threads > cores:
        out.append(f"{s.cpu_threads} CPU threads asked for on a machine with {cores} core(s): candidates will compete for "
                   f"the cores and may time out; give at most {cores} (--cpu-threads)")
    return out


@contextlib.contextmanager
def heartbeat(search, clock: bool = False):
    """Renew this process's leases every third of ``lease_s`` while the body runs; with
    ``clock`` (the engine, which owns the run's clock) store the time spent too, so an engine
    killed mid-candidate (SIGKILL, a lost machine) loses at most one beat of its spend rather
    than everything since its last finished node."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(search.settings.lease_s / 3):
            try:
                search.storage.renew_leases(search.owner, search.settings.lease_s)
                if clock:
                    search.storage.update_run(search.run_id, elapsed_s=search.clock.elapsed)
            except BaseException as exc:  # a missed beat is retried; the lease covers two more
                logger.warning("heartbeat failed: %s", exc or type(exc).__name__)

    thread = threading.Thread(target=beat, name="mcgs-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def requeue_lost(search) -> None:
    """Queue again the nodes whose worker is gone (its lease lapsed); past ``max_attempts``
    claims a node is marked interrupted instead."""
    requeued, lost = search.storage.requeue_lost(search.run_id, search.settings.max_attempts)
    if requeued:
        search.say(f"{len(requeued)} node(s) whose worker was lost are queued again")
    if lost:
        logger.warning("%d node(s) lost their worker %d times and are marked interrupted", len(lost), search.settings.max_attempts)


def retry_interrupted(search) -> list[FrozenNode]:
    """Queue a copy of every INTERRUPTED node not tried again yet: a node cut short by a stop or
    by the end of the budget carries no verdict, so a resumed run runs the same program (same
    parent, operator, plan, code and edges; ``config.retry_of`` names the node) instead of
    writing a new one, and the expansion is not lost (a Ctrl-C during the first LightGBM draft
    used to drop that family for the rest of the run). The interrupted node stays as it was:
    finished history is immutable. Nodes lost by ``max_attempts`` workers in a row are not tried
    again.

    Returns:
        The queued copies.
    """
    nodes = search.nodes()
    retried = {n.config.get("retry_of") for n in nodes if n.config.get("retry_of") is not None}
    todo = [n for n in nodes if n.state is NodeState.INTERRUPTED and n.seq not in retried and n.attempts < search.settings.max_attempts]
    if not todo:
        return []
    extra: dict[int, list] = {}
    for e in search.storage.get_edges(search.run_id):
        if e.kind is not EdgeKind.DERIVES:
            extra.setdefault(e.dst, []).append((e.src, e.kind, e.data))
    return [search.storage.add_node(search.run_id, parent_id=n.parent_id, operator=n.operator, plan=n.plan, code=n.code,
                                    config={**n.config, "retry_of": n.seq}, knowledge_ids=n.knowledge_ids,
                                    extra_edges=extra.get(n.id, ()), review=n.review, fidelity=n.fidelity)
            for n in todo]


def prepare_node_workspace(search, node: FrozenNode) -> tuple[Path, str | None]:
    """Create ``node``'s workspace (its program, ``input`` linked to the run's input, or to its
    fidelity's subsample (:mod:`mcgs.fidelity`); for an
    ensemble node, its members' predictions under ``members/``) and mark the node RUNNING.

    Returns:
        The workspace, and None, or why the node cannot run (an ensemble member's artifacts
        are lost): the caller records it ``invalid_output``.
    """
    inp = search.fidelity.input_dir(node.fidelity)
    ws = search.disk.with_space(lambda: prepare_workspace(inp, search.node_dir(node), node.code), search.node_dir(node))
    problem = None
    if node.operator is Operator.ENSEMBLE:
        try:
            copy_members(node, {n.id: n for n in search.nodes()}, search.node_dir, ws, search.max_output_bytes, member_files(search.task))
        except CandidateFileError as exc:  # a member's workspace was removed or damaged since
            problem = f"a member's artifacts are lost: {exc}"
    search.storage.set_running(node.id, str(ws.relative_to(search.run_dir)))
    return ws, problem


def executor_of(search):
    """The run's executor (:mod:`mcgs.executors`), opened on first use: the ``executor``
    setting's (``local``: this machine's sandbox; ``ray``: a Ray cluster). Closed by
    :func:`close_executor` when the sitting ends.

    Raises:
        RunError: the executor cannot start (Ray missing, no cluster at the address); the
            message says how to fix it.
    """
    from mcgs.executors import ExecutorError, make_executor

    with _executor_lock:
        if search.executor is None:
            try:
                search.executor = make_executor(search.settings, search.gpu_pool, gpu_tasks=search.task.media is not None, say=search.say)
            except ExecutorError as exc:
                raise RunError(str(exc)) from None
        return search.executor


_executor_lock = threading.Lock()


def close_executor(search) -> None:
    """Give back what the run's executor holds (a Ray connection); a later candidate opens it again."""
    with _executor_lock:
        executor, search.executor = search.executor, None
    if executor is not None:
        executor.close()


def execute(search, node: FrozenNode, timeout: float, seed: int) -> FrozenNode:
    """Run a stored node's program in its workspace through the run's executor (this
    machine's sandbox, or a Ray cluster: :func:`executor_of`), then let the search score and
    store the verdict (:meth:`mcgs.search.Search.tell`).

    A candidate whose machine or worker process was lost (:class:`mcgs.executors.CandidateLost`)
    is queued again and run again, as a node whose worker's lease lapsed, until it was claimed
    ``max_attempts`` times; then it is stored interrupted.

    Args:
        search: The search.
        node: A PENDING node claimed by this process.
        timeout: Its time limit, seconds (at least 1 is given).
        seed: ``MCGS_SEED`` for the program.

    Returns:
        The finished node.

    Raises:
        KeyboardInterrupt: the search is being stopped; the program was killed and no verdict
            stored (the caller marks the node interrupted).
    """
    from mcgs.executors import CandidateLost

    t0, left = time.monotonic(), timeout
    while True:
        ws, problem = prepare_node_workspace(search, node)
        if problem is not None:
            return record_verdict(search, node, NodeState.INVALID_OUTPUT, None, problem, None)
        try:
            result, predicted = _run_job(search, node, ws, max(1.0, left), seed)
            break
        except CandidateLost as exc:
            if search.stop_requested:
                raise KeyboardInterrupt("stop requested") from None
            search.say(f"node {node.seq}: {exc}")
            again = search.storage.requeue_node(node.id, search.owner, search.settings.max_attempts, str(exc))
            claimed = search.storage.claim_node(search.run_id, search.owner, search.settings.lease_s, node_id=node.id) if again else None
            if claimed is None:  # claimed max_attempts times: stored interrupted
                return search.storage.get_node(node.id)
            node, left = claimed, timeout - (time.monotonic() - t0)  # a run again has what is left of the time
    if search.stop_requested:  # stopped by the user: no verdict on the program
        raise KeyboardInterrupt("stop requested")
    if result.outcome is Outcome.TIMEOUT and predicted is not None:
        result = dataclasses.replace(result, error=f"{result.error} (its limit: {search.settings.timeout_factor:g} x the {predicted:.0f} s "
                                                   f"the cost model predicted for it; the run's limit of one candidate is "
                                                   f"{search.settings.node_limit_s:.0f} s)")
    return judge(search, node, result)


def _run_job(search, node: FrozenNode, ws: Path, timeout: float, seed: int):
    """Hand a prepared node to the run's executor.

    Returns:
        ``(result, predicted)``: how the program ended, and the cost model's prediction of its
        run time (seconds) when it set the node's limit, else None.

    Raises:
        CandidateLost: the executor lost the machine or process running it.
    """
    from mcgs.executors import Job

    executor = executor_of(search)
    # the node's own limit: the cost model's (mcgs.cost_model.candidate_limit) or the fixed one
    own, predicted = candidate_limit(search, node, max(timeout, search.settings.node_limit_s))
    # a limit below the node's own is the end of the run's budget: a program still running
    # then is cancelled (no verdict), not timed out
    cut = timeout if timeout < own - 1e-6 else None
    # a candidate elsewhere gets its share of the threads; this machine's free cores do not bound it
    threads = None if executor.name == "local" else max(1, search.settings.cpu_threads // search.settings.workers)
    job = Job(node_id=node.id, workspace=ws, input_dir=search.fidelity.input_dir(node.fidelity).resolve(),
              limits=search.sandbox_limits(own, threads=threads), env={"MCGS_SEED": str(seed)}, cancel_after_s=cut,
              max_output_bytes=search.max_output_bytes)
    return executor.run(job, search.stop_event), predicted


def search_serially(search) -> None:
    """Expand one node at a time until a budget is spent (``workers=1``)."""
    while True:
        if search.stop_requested:
            raise KeyboardInterrupt("stop requested")
        search.disk.wait_for_floor()
        reason = search.budget_exhausted()
        if reason:
            search.stop_reason = reason
            return
        try:
            search.step()
        except CoderStop as exc:
            search.coder_stopped(exc)


def next_candidate(search, in_flight: int = 0) -> tuple[FrozenNode, float, int] | None:
    """The next node to run: claimed from the queue, or selected, written, reviewed and stored
    (``search.launch()``; steps that end without a candidate, a rejected program or an
    in-search ensemble, are passed over), after a pause while the disk is below its floor.

    Args:
        search: The search.
        in_flight: Candidates this process runs now (they count against the node budget).

    Returns:
        ``(node, timeout_s, seed)``, or None once a budget is spent (``search.stop_reason``
        says which; a coder that asks to stop spends the run's).

    Raises:
        KeyboardInterrupt: the search is being stopped.
    """
    while True:
        if search.stop_requested:
            raise KeyboardInterrupt("stop requested")
        search.disk.wait_for_floor()
        reason = search.budget_exhausted(in_flight=in_flight)
        if reason:
            search.stop_reason = reason
            return None
        try:
            launched = search.launch()
        except CoderStop as exc:
            search.coder_stopped(exc)
            continue
        if launched is not None:
            return launched


def search_in_parallel(search) -> None:
    """Keep ``settings.workers`` candidates running at once (DESIGN §7).

    Only this thread selects and writes programs; worker threads each drive one sandbox process
    with ``cpu_threads // workers`` threads. A launched node is stored PENDING at once, so the
    next selection sees it as an in-flight visit with the virtual loss and goes elsewhere.
    Coordination is through the storage (SQLite in WAL mode).
    """
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    workers = search.settings.workers
    in_flight: dict = {}
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mcgs-worker")
    try:
        while True:
            if search.stop_requested:
                raise KeyboardInterrupt("stop requested")
            while len(in_flight) < workers:
                launched = next_candidate(search, in_flight=len(in_flight))
                if launched is None:
                    break
                node, timeout, seed = launched
                in_flight[pool.submit(execute, search, node, timeout, seed)] = node
            if not in_flight:
                break
            done, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                in_flight.pop(fut)
                fut.result()  # re-raise a worker's error (or its KeyboardInterrupt on stop)
    except BaseException:
        search.request_stop()  # workers kill their candidates and return
        raise
    finally:
        pool.shutdown(wait=True)


def work(search, drain: bool = False) -> int:
    """Take part in a run as one more worker (``mcgs worker``): claim queued nodes and, unless
    ``drain``, select and write new ones, until the run finishes, its engine builds the final
    ensemble (status ``ensembling``) or the budget (the engine's clock) or node budget is spent.

    Workers may run in other processes or on other machines sharing the storage (PostgreSQL)
    and the artifacts folder. A worker records node verdicts only: the run's status, clock,
    final ensemble and ``best/`` belong to the process that runs :meth:`mcgs.search.Search.run`.

    Args:
        search: The search, opened by this worker.
        drain: Only run queued nodes; return when none is left.

    Returns:
        How many nodes this worker finished.

    Raises:
        KeyboardInterrupt: after recording this worker's running node INTERRUPTED.
    """
    from mcgs.snapshot import live_elapsed

    search.is_worker = True
    if (search.run_dir / "experience.json").is_file():  # the engine's, read only (a worker never recalls)
        prepare_experience(search)
    requeue_lost(search)
    done = 0
    try:
        with heartbeat(search):
            while not search.stop_requested:
                run = search.storage.get_run(search.run_record.name)
                if run.status in (RunStatus.FINISHED, RunStatus.ENSEMBLING):
                    break
                if run.status is RunStatus.RUNNING:  # the engine's clock: the elapsed time stored at
                    # its last write (when this worker joined) lags it by up to a node
                    search.clock.elapsed_before, search.clock.started, search.clock.paused_s = live_elapsed(run), time.monotonic(), 0.0
                if search.budget_exhausted():
                    break
                if drain:
                    node = search.storage.claim_node(search.run_id, search.owner, search.settings.lease_s)
                    if node is None:
                        break
                    launched = (node, search.budget.node_timeout(), search.node_seed(node))
                else:
                    try:
                        launched = search.launch()
                    except CoderStop:
                        break
                    if launched is None:
                        continue
                search.say(f"worker {search.owner}: running node {launched[0].seq} (attempt {launched[0].attempts})")
                execute(search, *launched)
                done += 1
            if search.stop_requested:
                raise KeyboardInterrupt("stop requested")
    except BaseException:
        search.storage.interrupt_unfinished(search.run_id, owner=search.owner)
        raise
    finally:
        close_executor(search)
    return done

