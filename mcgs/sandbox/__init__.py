"""Run one candidate program: workspace, process tree, limits, timeout, output capture.

A candidate is a standalone script run as ``python solution.py`` with its workspace as the
working directory (DESIGN §2). :func:`run_program` starts it in its own process session with
a scrubbed environment and resource limits, waits for it without busy-spinning, and returns an
:class:`ExecutionResult`. What happens to the candidate is data (:class:`Outcome`), never an
exception: a crash is ``BUGGY``, a run past its wall-clock limit is ``TIMEOUT``, a run past its
memory limit is ``OOM``.

Isolation, and where each part comes from:

* **Output** goes to ``workspace/logs/stdout.txt`` and ``logs/stderr.txt``, never to pipes that
  can fill up and block the child; only capped tails enter the result, read from the engine's
  own descriptors of those files (a program that replaces them with links to other files
  changes nothing the engine reads; :mod:`mcgs.candidate_files`).
* **Process tree.** The child leads a new session (``start_new_session=True``), so
  ``os.killpg`` reaches everything that stays in its process group. Descendants that leave the
  group (``os.setsid``, double fork) are caught three ways: the tree is snapshotted by parent
  pid every :data:`MONITOR_INTERVAL_S` while the program runs; descendants of every process
  already seen are followed even after their parent died; and at cleanup every process whose
  environment carries this run's ``MCGS_SANDBOX_ID`` marker is killed (the environment is
  inherited across ``fork``/``exec`` unless a program replaces it on purpose). Termination is
  SIGTERM, a grace of :data:`KILL_GRACE_S`, then SIGKILL -- the pattern of
  ``psutil.wait_procs`` documented in psutil's "Kill process tree" recipe.
* **Memory.** ``RLIMIT_AS`` is set to ``memory_mb`` in a ``preexec_fn`` (per process, inherited
  by descendants), and a watchdog measures the whole tree every :data:`MONITOR_INTERVAL_S` and
  kills it when it passes the limit; the watchdog covers trees of many processes, each under
  the per-process limit. What it counts is the tree's proportional set size (PSS, from
  ``/proc/PID/smaps_rollup``: a page shared by a fork pool counts once in all, not once per
  process as resident set sizes would) plus what the program keeps in its private ``/tmp`` and
  ``/dev/shm`` (tmpfs, i.e. memory, in the namespace sandbox; shared-memory pages are counted
  there, not again in PSS). The summed resident set size is an upper bound of that and is read
  first; PSS is read only when it passes the limit. ``RLIMIT_CORE`` is 0.
* **Disk.** With ``disk_mb``, what the workspace takes on disk is measured every
  :data:`DISK_INTERVAL_S` and the tree is killed past the cap (outcome ``DISK``); the largest
  file is capped too (``RLIMIT_FSIZE``), so a single huge write fails at once.
* **Processes.** The tree may hold at most ``max_processes`` processes (watchdog; as ``nobody``
  also ``RLIMIT_NPROC``); a fork bomb ends as ``PROCESS_LIMIT``, not as a memory failure.
* **Environment.** :func:`scrubbed_env` builds the child's environment from an allow-list;
  API keys, tokens, secrets and proxy settings never reach a candidate (AIDE passes the whole
  parent environment -- STYLE.md "Fix" list).

* **Namespaces** (``isolation="namespaces"``, when bubblewrap is installed; see
  :func:`namespace_isolation_available`): the program runs under ``bwrap`` in new mount, pid,
  network, IPC and UTS namespaces -- no network (its own loopback only), a private ``/tmp`` and
  ``/dev/shm`` (tmpfs of at most ``memory_mb`` each, counted in the memory limit), its own pid 1, killed with its parent -- seeing only the system directories and
  the Python installation read-only, the run's input read-only and its own workspace
  read-write; held-out answers, other nodes and other runs are not in its file system. When
  the engine runs as root the program runs as ``nobody`` (``setpriv``, no capabilities, no new
  privileges) with a process-count limit. Otherwise (``isolation="process-session"``) the
  program runs as the engine's user with the protections above and no namespaces; the run
  records which level it had.
* **Other limits**: CPU time (``RLIMIT_CPU``: a backstop at twice the wall limit per thread)
  and file size (``RLIMIT_FSIZE``, :data:`MAX_FILE_MB`).

The package's parts: :mod:`~mcgs.sandbox.limits` (what a run may use),
:mod:`~mcgs.sandbox.environment` (what it starts with), :mod:`~mcgs.sandbox.isolation`
(namespaces or a process session, and the child's resource limits),
:mod:`~mcgs.sandbox.supervisor` (starting, watching and stopping the process tree) and
:mod:`~mcgs.sandbox.classification` (how a run ended); :func:`run_program` puts them together.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Mapping, Sequence

from mcgs.gpus import gpu_env
from mcgs.sandbox.classification import ExecutionResult, Outcome, classify, result_of_run
from mcgs.sandbox.cores import CoreMonitor, available_cores, free_cores, shared_monitor
from mcgs.sandbox.environment import MARKER_ENV, OWNER_ENV, TIME_LIMIT_ENV, scrubbed_env
from mcgs.sandbox.isolation import namespace_argv, namespace_isolation_available, resolve_isolation
from mcgs.sandbox.limits import ISOLATION_NAMESPACES, ISOLATION_SESSION, SandboxLimits
from mcgs.sandbox.supervisor import Supervisor, fresh_logs, kill_candidates, live_candidates, owner_alive, owner_id, read_tail

__all__ = [
    "result_of_run",
    "ISOLATION_NAMESPACES",
    "ISOLATION_SESSION",
    "namespace_isolation_available",
    "resolve_isolation",
    "Outcome",
    "SandboxLimits",
    "ExecutionResult",
    "run_program",
    "scrubbed_env",
    "live_candidates",
    "kill_candidates",
    "owner_id",
    "owner_alive",
    "MARKER_ENV",
    "TIME_LIMIT_ENV",
    "CoreMonitor",
    "available_cores",
    "free_cores",
    "shared_monitor",
]

logger = logging.getLogger(__name__)


def _checked_workspace(workspace: Path, script: str) -> Path:
    """The resolved workspace, which must be a folder holding ``script``.

    Raises:
        ValueError: it is not a folder, or the script is not a file in it.
    """
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise ValueError(f"workspace {workspace} is not a directory")
    workspace = workspace.resolve()
    if not (workspace / script).is_file():
        raise ValueError(f"script {script!r} does not exist in {workspace}")
    return workspace


def _program_env(extra_env, workspace: Path, limits: SandboxLimits, marker: str, cancel_after_s: float | None) -> dict[str, str]:
    """The program's environment: :func:`scrubbed_env`, the supervisor's markers, the GPUs it
    was handed (or none) and :data:`TIME_LIMIT_ENV` (the seconds it has: contract 1.3)."""
    env = scrubbed_env(extra_env, workspace=workspace, cpu_threads=limits.cpu_threads)
    env[MARKER_ENV] = marker
    env[OWNER_ENV] = owner_id()
    env.update(gpu_env(limits.gpus))
    ends = [t for t in (limits.timeout_s, cancel_after_s) if t is not None]
    env[TIME_LIMIT_ENV] = str(int(min(ends)))
    return env


def _cancelled_before_start(workspace: Path, feed) -> ExecutionResult:
    """The record of a program whose run was cancelled before it started (its feed closed)."""
    logger.info("%s: cancelled before start", workspace)
    if feed is not None:
        feed.abandon()
    return ExecutionResult(outcome=Outcome.CANCELLED, returncode=None, runtime_s=0.0, stdout_tail="", stderr_tail="",
                           error="cancelled before start", traceback_tail=None, peak_rss_mb=None)


def _start(runner: Supervisor, feed) -> None:
    """Start the program; a forecast-mode feed starts answering it (or, when the program could
    not start, closes its pipes)."""
    try:
        runner.start()
    except BaseException:
        if feed is not None:
            feed.abandon()
        raise
    if feed is not None:
        feed.started()


def run_program(
    workspace: Path,
    script: str = "solution.py",
    limits: SandboxLimits | None = None,
    *,
    args: Sequence[str] = (),
    python: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    cancel: threading.Event | None = None,
    cancel_after_s: float | None = None,
    feed=None,
) -> ExecutionResult:
    """Run ``python script`` in ``workspace`` under ``limits`` and classify what happened.

    Blocks until the program exits, its time or memory limit passes, ``cancel`` is set or
    ``cancel_after_s`` passes; in every case no process of its tree is left running when this
    returns.

    Args:
        workspace: The node's workspace; the working directory of the program. ``logs/`` (the
            stdout/stderr files) and ``tmp/`` (``TMPDIR``) are created in it.
        script: The program's path relative to ``workspace``.
        limits: Time, memory, thread and output limits. Required (it has a default only so the
            positional order ``(workspace, script, limits)`` stays valid).
        args: Arguments after the script (``python script *args``).
        python: The interpreter; defaults to :data:`sys.executable`.
        extra_env: Extra environment variables for the program (see :func:`scrubbed_env`).
        cancel: When set while the program runs, the tree is stopped promptly and the outcome
            is ``CANCELLED`` with ``error`` ``"cancelled after ... s"``. If it is set before the
            call, the program is not started (``returncode`` ``None``, ``CANCELLED``).
        cancel_after_s: Seconds after the start at which the caller's own budget ends (the
            run's time budget), when that comes before ``limits.timeout_s``: a program still
            running then is stopped with outcome ``CANCELLED`` and ``error``
            ``"stopped after N s: the run's time budget ended"``, not ``TIMEOUT``: it did not
            pass its own limit.
        feed: Forecast mode's :class:`mcgs.forecast.WindowFeed` (its two pipes inherited; the caller reads its result).

    Returns:
        The :class:`ExecutionResult`.

    Raises:
        ValueError: ``workspace`` is not a directory, ``script`` is not a file in it, or the
            interpreter cannot be started.
        TypeError: ``limits`` is missing.
        KeyboardInterrupt: Re-raised after the tree was stopped, when the caller was
            interrupted while waiting. Any other exception raised while waiting is re-raised
            the same way, after the cleanup.
    """
    if limits is None:
        raise TypeError("run_program() needs limits=SandboxLimits(...)")
    workspace = _checked_workspace(workspace, script)
    marker = uuid.uuid4().hex
    env = _program_env({**(extra_env or {}), **(feed.env() if feed else {})}, workspace, limits, marker, cancel_after_s)
    argv = [python or sys.executable, script, *args]
    out_fd, err_fd = fresh_logs(workspace)
    try:
        as_other_user = False
        if limits.isolation == ISOLATION_NAMESPACES:
            argv, as_other_user = namespace_argv(argv, workspace, limits)
        if cancel is not None and cancel.is_set():
            return _cancelled_before_start(workspace, feed)
        runner = Supervisor(argv, workspace, env, limits, marker, out_fd, err_fd, as_other_user, pass_fds=feed.child_fds if feed else ())
        _start(runner, feed)
        returncode, runtime_s, stop_reason, peak_rss_mb = runner.run(cancel, cancel_after_s)
        # read through the engine's own descriptors: whatever the program put at those paths
        # since (a link to another file) is never read
        stdout_tail = read_tail(out_fd, limits.tail_chars)
        stderr_tail = read_tail(err_fd, limits.tail_chars)
    finally:
        os.close(out_fd)
        os.close(err_fd)
    detail = runner.stop_detail if stop_reason else None
    tmpfs_full = limits.memory_mb is not None and runner.tmpfs_peak_bytes >= limits.memory_mb * 2**20 / 4
    outcome, error, traceback_tail = classify(returncode, stop_reason, stderr_tail, limits, runtime_s, detail, tmpfs_full)
    logger.info("%s: %s (returncode %s, %.2f s, peak RSS %s MB)%s", workspace, outcome.value, returncode, runtime_s,
                None if peak_rss_mb is None else round(peak_rss_mb, 1), f": {error}" if error else "")
    return ExecutionResult(outcome=outcome, returncode=returncode, runtime_s=runtime_s, stdout_tail=stdout_tail, stderr_tail=stderr_tail,
                           error=error, traceback_tail=traceback_tail, peak_rss_mb=peak_rss_mb, gpus=limits.gpus, peak_gpu_mb=runner.peak_gpu_mb)
