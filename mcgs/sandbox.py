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
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import psutil

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
    "MARKER_ENV",
]

logger = logging.getLogger(__name__)

#: Seconds between checks for exit and cancellation in the wait loop.
POLL_INTERVAL_S = 0.1
#: Seconds between process-tree snapshots and memory measurements (the memory watchdog).
MONITOR_INTERVAL_S = 0.2
#: Seconds between measurements of the workspace's disk use (the disk cap).
DISK_INTERVAL_S = 1.0
#: Seconds between SIGTERM and SIGKILL when a tree is stopped.
KILL_GRACE_S = 2.0
#: Seconds to wait for processes to disappear after SIGKILL before giving up (and logging).
KILL_WAIT_S = 2.0
#: Environment variable holding a per-run token; used to find escaped descendants at cleanup.
MARKER_ENV = "MCGS_SANDBOX_ID"
#: Longest ``error`` string kept in a result.
ERROR_MAX_CHARS = 500
#: Isolation levels (recorded on the run).
ISOLATION_NAMESPACES = "namespaces"
ISOLATION_SESSION = "process-session"
#: User and group a program runs as in the namespace sandbox when the engine is root (nobody).
SANDBOX_UID = SANDBOX_GID = 65534
#: Default limit on processes (and, as the sandbox user, processes plus threads) of one program.
MAX_PROCESSES = 256
#: Largest file a program may write, MiB (``RLIMIT_FSIZE``).
MAX_FILE_MB = 16384

#: Variables copied from the parent when set. Nothing else passes.
_ALLOWED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "PYTHONHASHSEED",
    # This machine's OpenBLAS needs these for correct numpy results.
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
#: Names that are never passed, even through ``extra`` (matched case-insensitively).
_SECRET_ENV = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$"
    r"|^(ANTHROPIC|AWS|OPENAI)_"
    r"|^(HTTPS?|NO|ALL|FTP)_PROXY$",
    re.IGNORECASE,
)
#: Thread-count variables set to ``SandboxLimits.cpu_threads``.
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")

# An exception line that means the program ran out of memory: ``MemoryError``, numpy's
# ``numpy._core._exceptions._ArrayMemoryError``, C++ ``std::bad_alloc`` (LightGBM, CatBoost,
# XGBoost abort with it), and ENOMEM from fork/mmap.
# An exception line naming one of these is an out-of-memory failure.
_OOM_EXCEPTION = re.compile(
    r"^(?:[\w.]+\.)?_?\w*MemoryError\b|\[Errno 12\] Cannot allocate memory"
    r"|failed to map segment from shared object"
)
# Found anywhere in stderr, these mean out of memory even without a Python traceback.
_OOM_ANYWHERE = re.compile(r"std::bad_alloc|\bout of memory\b", re.IGNORECASE)
# The last error line of a write the file-size limit refused (EFBIG) or a full file system.
_DISK_SIGN = re.compile(r"\[Errno (27|28)\]|File too large|No space left on device|Disk quota exceeded", re.IGNORECASE)
_NO_SPACE = re.compile(r"\[Errno 28\]|No space left on device")
# ... of a process or thread that could not be started: EAGAIN from fork/clone (RLIMIT_NPROC).
_PROCESS_SIGN = re.compile(
    r"^BlockingIOError: \[Errno 11\]|can't start new thread|fork: (retry: )?Resource temporarily unavailable"
    r"|pthread_create failed|Resource temporarily unavailable.*(fork|thread|clone)"
)
_TRACEBACK_HEADER = "Traceback (most recent call last):"
_FATAL_HEADER = "Fatal Python error:"  # faulthandler (PYTHONFAULTHANDLER=1) on a crash


class Outcome(str, enum.Enum):
    """What happened to a candidate program.

    ``DISK``: the program passed its disk cap (the watchdog, or a write refused as too large or
    for want of space); ``PROCESS_LIMIT``: it reached its limit on processes and threads (a fork
    bomb). ``CANCELLED``: the caller stopped it before any limit of its own passed (a stop of
    the run, or the end of the run's time budget): no verdict on the program, which a resumed
    run queues again. ``INVALID_OUTPUT`` is never produced by the sandbox; the engine's
    evaluation step assigns it to a program that exited cleanly but wrote no valid submission
    or predictions.
    """

    OK = "ok"
    BUGGY = "buggy"
    TIMEOUT = "timeout"
    OOM = "oom"
    DISK = "disk"
    PROCESS_LIMIT = "process_limit"
    CANCELLED = "cancelled"
    INVALID_OUTPUT = "invalid_output"


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one program run.

    Attributes:
        timeout_s: Wall-clock limit in seconds.
        memory_mb: Memory limit in MiB, applied as ``RLIMIT_AS`` per process and as a limit on
            the resident set size summed over the process tree; ``None`` for no limit.
        cpu_threads: Value of ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
            ``MKL_NUM_THREADS`` and ``NUMEXPR_NUM_THREADS`` in the child.
        tail_chars: Number of characters of stdout and stderr kept in the result.
        isolation: :data:`ISOLATION_NAMESPACES` or :data:`ISOLATION_SESSION` (see the module
            docstring; :func:`resolve_isolation` picks one).
        disk_mb: Disk cap of the workspace, MiB: what the program's files take on disk, checked
            every :data:`DISK_INTERVAL_S`, and the largest single file it may write
            (``RLIMIT_FSIZE``); ``None`` for no cap but :data:`MAX_FILE_MB`.
        max_processes: Processes the program's tree may have at once (the watchdog), and
            processes plus threads of the sandbox user (``RLIMIT_NPROC``, namespace sandbox as
            root).
    """

    timeout_s: float
    memory_mb: int | None = 8192
    cpu_threads: int = 2
    tail_chars: int = 4000
    isolation: str = ISOLATION_SESSION
    disk_mb: float | None = None
    max_processes: int = MAX_PROCESSES

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s!r}")
        if self.memory_mb is not None and self.memory_mb <= 0:
            raise ValueError(f"memory_mb must be positive or None, got {self.memory_mb!r}")
        if self.cpu_threads < 1:
            raise ValueError(f"cpu_threads must be >= 1, got {self.cpu_threads!r}")
        if self.tail_chars < 0:
            raise ValueError(f"tail_chars must be >= 0, got {self.tail_chars!r}")
        if self.disk_mb is not None and self.disk_mb <= 0:
            raise ValueError(f"disk_mb must be positive or None, got {self.disk_mb!r}")
        if self.max_processes < 2:
            raise ValueError(f"max_processes must be >= 2, got {self.max_processes!r}")


@dataclass(frozen=True)
class ExecutionResult:
    """The record of one program run.

    Attributes:
        outcome: ``OK`` on exit code 0, ``BUGGY`` on a non-zero exit, ``TIMEOUT`` when the
            wall-clock limit passed, ``CANCELLED`` when the caller stopped it first, ``OOM``
            when the memory limit was passed (watchdog, ``MemoryError``, ``std::bad_alloc``, or
            SIGKILL not sent by us); :class:`Outcome` lists the rest.
        returncode: The process's exit code, negative for a signal (``-15``/``-9`` after the
            sandbox stopped it); ``None`` when the program was never started.
        runtime_s: Wall-clock seconds from start until exit or until the sandbox stopped it.
        stdout_tail: The last ``tail_chars`` characters of stdout.
        stderr_tail: The last ``tail_chars`` characters of stderr.
        error: Short reason: the last exception line for ``BUGGY`` (``"KeyError: 'Cabin'"``),
            ``"timed out after 30.0 s"``, ``"cancelled after 1.2 s"``,
            ``"memory limit of 8192 MB exceeded"``; ``None`` for ``OK``.
        traceback_tail: For ``BUGGY`` (and ``OOM`` from a ``MemoryError``), the Python traceback
            parsed from stderr, at most ``tail_chars`` characters; otherwise ``None``.
        peak_rss_mb: Largest resident set size seen, in MiB: the maximum of the tree totals
            sampled by the watchdog and the main process's own ``ru_maxrss``.
    """

    outcome: Outcome
    returncode: int | None
    runtime_s: float
    stdout_tail: str
    stderr_tail: str
    error: str | None
    traceback_tail: str | None
    peak_rss_mb: float | None


def result_of_run(returncode: int | None, runtime_s: float, stdout: str = "", stderr: str = "", *, timed_out: bool = False,
                  cancelled: bool = False, tail_chars: int = 4000) -> ExecutionResult:
    """The record of a program run by the caller rather than the sandbox (``Search.ask`` and
    ``Search.tell``), classified as the sandbox classifies its own runs.

    Args:
        returncode: The process's exit code (negative for a signal), None if it never started.
        runtime_s: Its wall time, seconds.
        stdout, stderr: What it printed (the tails are kept).
        timed_out: The caller stopped it at its time limit.
        cancelled: The caller stopped it for a reason of its own (no verdict on the program:
            ``CANCELLED``; the node is stored interrupted and a resumed run queues it again).
        tail_chars: Characters of each output kept.

    Returns:
        ``OK`` on exit code 0, else ``CANCELLED``, ``TIMEOUT``, ``OOM``, ``DISK``,
        ``PROCESS_LIMIT`` or ``BUGGY`` by the same rules as :func:`run_program` (the last
        exception in stderr).
    """
    limits = SandboxLimits(timeout_s=max(runtime_s, 1e-3), memory_mb=None, tail_chars=tail_chars)
    out, err = stdout[-tail_chars:] if tail_chars else "", stderr[-tail_chars:] if tail_chars else ""
    stop_reason = "cancel" if cancelled else "timeout" if timed_out else None
    outcome, error, tb = _classify(returncode, stop_reason, err, limits, runtime_s)
    return ExecutionResult(outcome=outcome, returncode=returncode, runtime_s=runtime_s, stdout_tail=out, stderr_tail=err,
                           error=error, traceback_tail=tb, peak_rss_mb=None)


def scrubbed_env(
    extra: Mapping[str, str] | None = None,
    *,
    workspace: Path | None = None,
    cpu_threads: int = 2,
) -> dict[str, str]:
    """Build a candidate's environment from an allow-list of the parent's variables.

    Copies ``PATH``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TZ``, ``PYTHONHASHSEED``,
    ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` when set; drops everything else (API keys,
    tokens, proxies, ``PYTHONPATH``, ``VIRTUAL_ENV`` ...). Sets the thread-count variables,
    ``PYTHONUNBUFFERED=1``, ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONFAULTHANDLER=1`` and
    ``MPLBACKEND=Agg``. ``extra`` is applied last, except that names that look like secrets or
    proxy settings are dropped from it too (with a warning).

    Args:
        extra: Variables to add or override.
        workspace: When given, ``HOME`` is set to it and ``TMPDIR`` to ``workspace/tmp``
            (created); when ``None``, neither is set.
        cpu_threads: Value for ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
            ``MKL_NUM_THREADS`` and ``NUMEXPR_NUM_THREADS``.

    Returns:
        A new dictionary; the parent's ``os.environ`` is not changed.
    """
    env = {name: os.environ[name] for name in _ALLOWED_ENV if name in os.environ}
    if workspace is not None:
        workspace = Path(workspace).resolve()
        tmp = workspace / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(workspace)
        env["TMPDIR"] = str(tmp)
    for name in _THREAD_ENV:
        env[name] = str(cpu_threads)
    env.update(
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONFAULTHANDLER="1",
        MPLBACKEND="Agg",
    )
    for name, value in (extra or {}).items():
        if _SECRET_ENV.search(name):
            logger.warning("not passing %s to a sandboxed program", name)
            continue
        env[name] = str(value)
    return env


OWNER_ENV = "MCGS_ENGINE"  # the engine process that started a candidate (see owner_id)


def owner_id() -> str:
    """This process as a claim owner: ``host:pid:start``, where ``start`` is the process start
    time in whole seconds (so a reused pid is not mistaken for the old process)."""
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{int(psutil.Process().create_time())}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process behind ``owner`` (see :func:`owner_id`) still runs: True or False
    when it is on this host, None when it is on another one (then only its lease can tell)."""
    import socket

    rest = owner.split(":")
    try:
        host, pid, start = ":".join(rest[:-2]), int(rest[-2]), int(rest[-1])
    except (ValueError, IndexError):
        return None
    if host != socket.gethostname():
        return None
    try:
        return int(psutil.Process(pid).create_time()) == start
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def kill_candidates(under: Path, orphans_only: bool = False) -> int:
    """SIGKILL every live sandboxed process under ``under`` (a run directory): candidates left
    running when the engine that started them was killed. Returns how many were killed.

    Args:
        orphans_only: Spare candidates whose engine (another worker of the run, see
            :data:`OWNER_ENV`) is still alive.
    """
    procs = []
    for pid in live_candidates(under=under):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            owner = proc.environ().get(OWNER_ENV)
            if orphans_only and owner and owner_alive(owner) is not False:
                continue
            proc.kill()
            procs.append(proc)
    psutil.wait_procs(procs, timeout=KILL_WAIT_S)
    return len(procs)


def live_candidates(under: Path | None = None) -> list[int]:
    """Pids of live (non-zombie) processes started by a sandbox on this machine.

    Every sandboxed program and its descendants carry :data:`MARKER_ENV` in their
    environment; a process whose environment cannot be read (another user's) is skipped.

    Args:
        under: Only processes whose working directory is inside this folder (e.g. one run
            directory); None for all.

    Returns:
        The pids, sorted; empty when no candidate is running.
    """
    root = Path(under).resolve() if under is not None else None
    alive = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if MARKER_ENV not in proc.environ() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if root is not None and not Path(proc.cwd()).resolve().is_relative_to(root):
                continue
            alive.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return sorted(alive)


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
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise ValueError(f"workspace {workspace} is not a directory")
    workspace = workspace.resolve()
    script_path = workspace / script
    if not script_path.is_file():
        raise ValueError(f"script {script!r} does not exist in {workspace}")

    marker = uuid.uuid4().hex
    env = scrubbed_env(extra_env, workspace=workspace, cpu_threads=limits.cpu_threads)
    env[MARKER_ENV] = marker
    env[OWNER_ENV] = owner_id()
    argv = [python or sys.executable, script, *args]
    out_fd, err_fd = _fresh_logs(workspace)
    try:
        as_other_user = False
        if limits.isolation == ISOLATION_NAMESPACES:
            argv, as_other_user = _namespace_argv(argv, workspace, limits)

        if cancel is not None and cancel.is_set():
            logger.info("%s: cancelled before start", workspace)
            return ExecutionResult(
                outcome=Outcome.CANCELLED,
                returncode=None,
                runtime_s=0.0,
                stdout_tail="",
                stderr_tail="",
                error="cancelled before start",
                traceback_tail=None,
                peak_rss_mb=None,
            )

        runner = _Runner(argv, workspace, env, limits, marker, out_fd, err_fd, as_other_user)
        returncode, runtime_s, stop_reason, peak_rss_mb = runner.run(cancel, cancel_after_s)
        # read through the engine's own descriptors: whatever the program put at those paths
        # since (a link to another file) is never read
        stdout_tail = _read_tail(out_fd, limits.tail_chars)
        stderr_tail = _read_tail(err_fd, limits.tail_chars)
    finally:
        os.close(out_fd)
        os.close(err_fd)
    detail = runner.stop_detail if stop_reason else None
    tmpfs_full = limits.memory_mb is not None and runner.tmpfs_peak_bytes >= limits.memory_mb * 2**20 / 4
    outcome, error, traceback_tail = _classify(
        returncode, stop_reason, stderr_tail, limits, runtime_s, detail, tmpfs_full
    )
    logger.info(
        "%s: %s (returncode %s, %.2f s, peak RSS %s MB)%s",
        workspace,
        outcome.value,
        returncode,
        runtime_s,
        None if peak_rss_mb is None else round(peak_rss_mb, 1),
        f": {error}" if error else "",
    )
    return ExecutionResult(
        outcome=outcome,
        returncode=returncode,
        runtime_s=runtime_s,
        stdout_tail=stdout_tail,
        stderr_tail=stderr_tail,
        error=error,
        traceback_tail=traceback_tail,
        peak_rss_mb=peak_rss_mb,
    )


# --------------------------------------------------------------------------------------------
# Process management


def _make_preexec(limits: SandboxLimits, as_other_user: bool = False):
    """Return the ``preexec_fn`` that sets the child's resource limits.

    It runs between ``fork`` and ``exec``, so it only calls ``resource.setrlimit`` (imported at
    module level) and allocates nothing of note. ``RLIMIT_NPROC`` is set only when the program
    runs as a user of its own (it counts every process of the user). ``RLIMIT_FSIZE`` is the
    smaller of :data:`MAX_FILE_MB` and the disk cap.
    """
    limit_bytes = None if limits.memory_mb is None else int(limits.memory_mb) * 1024 * 1024
    cpu_s = int(2 * limits.timeout_s * max(1, limits.cpu_threads)) + 10
    fsize = MAX_FILE_MB * 1024 * 1024
    if limits.disk_mb is not None:
        fsize = min(fsize, int(limits.disk_mb * 1024 * 1024))
    nproc = limits.max_processes

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
        if as_other_user:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return preexec


# --------------------------------------------------------------------------------------------
# Namespace sandbox (bubblewrap)


def _system_dirs() -> list[tuple[str, str | None]]:
    """``(path, symlink target or None)`` of the system directories a program needs."""
    out = []
    for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"):
        if os.path.islink(p):
            out.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            out.append((p, None))
    return out


def _python_dirs(python: str) -> list[str]:
    """Directories holding the interpreter and its libraries (read-only in the sandbox)."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    dirs = {os.path.realpath(d) for d in dirs} | dirs
    covered = ("/usr", "/bin", "/lib", "/lib64", "/etc")
    keep = sorted(d for d in dirs if os.path.isdir(d) and not any(d == c or d.startswith(c + "/") for c in covered))
    return [d for d in keep if not any(d != o and d.startswith(o + "/") for o in keep)]


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return [str(Path("/", *parts[: i + 1])) for i in range(len(parts))]


def _namespace_argv(argv: list[str], workspace: Path, limits: SandboxLimits | None = None) -> tuple[list[str], bool]:
    """``bwrap`` (and, as root, ``setpriv`` to nobody) around ``argv`` for ``workspace``; the
    private ``/tmp`` and ``/dev/shm`` hold at most ``limits.memory_mb`` each.

    Returns:
        ``(argv, runs_as_other_user)``. When the engine is root, the workspace is handed to the
        sandbox user (``chown``) so the program can write it.
    """
    root = os.geteuid() == 0
    cmd = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session"]
    if not root:
        cmd.append("--unshare-user-try")
    for path, link in _system_dirs():
        cmd += ["--symlink", link, path] if link else ["--ro-bind", path, path]
    size = [] if limits is None or limits.memory_mb is None else ["--size", str(int(limits.memory_mb) * 1024 * 1024)]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", *size, "--tmpfs", "/dev/shm", "--perms", "1777", *size, "--tmpfs", "/tmp"]
    made: set[str] = {"/", "/tmp", "/usr", "/etc", "/proc", "/dev"}

    def bind(kind: str, path: str) -> None:
        for a in _ancestors(path):
            if a not in made:
                cmd.extend(["--perms", "0755", "--dir", a])
                made.add(a)
        cmd.extend([kind, path, path])
        made.add(path)

    for d in _python_dirs(argv[0]):
        bind("--ro-bind", d)
    link = workspace / "input"
    if link.is_symlink():
        bind("--ro-bind", str(link.resolve()))
    bind("--bind", str(workspace))
    cmd += ["--chdir", str(workspace), "--"]
    if root:
        for dirpath, dirnames, filenames in os.walk(workspace):
            for name in (*dirnames, *filenames):
                os.lchown(os.path.join(dirpath, name), SANDBOX_UID, SANDBOX_GID)
        os.chown(workspace, SANDBOX_UID, SANDBOX_GID)
        cmd += ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd + argv, root


@functools.lru_cache(maxsize=1)
def namespace_isolation_available() -> bool:
    """True when ``bwrap`` (and, for root, ``setpriv``) is installed and a trial run inside the
    namespace sandbox succeeds on this machine (containers may forbid namespaces)."""
    import shutil
    import tempfile

    if shutil.which("bwrap") is None or (os.geteuid() == 0 and shutil.which("setpriv") is None):
        return False
    with tempfile.TemporaryDirectory(prefix="mcgs-sbx-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "solution.py").write_text("import os\nopen('ok', 'w').write(str(os.getpid()))\n")
        try:
            res = run_program(ws, "solution.py", SandboxLimits(timeout_s=30, memory_mb=None, isolation=ISOLATION_NAMESPACES))
        except (ValueError, OSError) as exc:
            logger.info("namespace sandbox unavailable: %s", exc)
            return False
        ok = res.outcome is Outcome.OK and (ws / "ok").is_file()
        if not ok:
            logger.info("namespace sandbox unavailable: %s %s", res.outcome.value, res.stderr_tail[-300:])
        return ok


def resolve_isolation(requested: str = "auto") -> str:
    """The isolation level to use: ``auto`` is namespaces when available, else process-session.

    Raises:
        ValueError: namespaces were requested (or ``auto`` under ``CI=true``) but bubblewrap is
            missing or does not work here, naming the fix.
    """
    if requested == ISOLATION_SESSION:
        return ISOLATION_SESSION
    if requested not in ("auto", ISOLATION_NAMESPACES):
        raise ValueError(f"unknown isolation {requested!r}; use auto, {ISOLATION_NAMESPACES} or {ISOLATION_SESSION}")
    if namespace_isolation_available():
        return ISOLATION_NAMESPACES
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    if requested == ISOLATION_NAMESPACES or ci:
        raise ValueError(
            "the namespace sandbox is required" + (" under CI=true" if ci and requested == "auto" else "")
            + " but bubblewrap is missing or cannot create namespaces here: install it (Debian: apt-get install bubblewrap util-linux)"
        )
    logger.warning("bubblewrap is not available: candidates run without namespaces (isolation %s)", ISOLATION_SESSION)
    return ISOLATION_SESSION


class _Runner:
    """Starts one program and owns its process tree until it is gone."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        limits: SandboxLimits,
        marker: str,
        stdout,
        stderr,
        as_other_user: bool = False,
    ) -> None:
        self.limits = limits
        self.marker = marker
        self.cwd = cwd
        self.tracked: dict[int, psutil.Process] = {}
        self.peak_rss_bytes = 0
        self.stop_detail: str | None = None  # what the watchdog measured when it stopped the tree
        self._tmpfs_pid: int | None = None  # a process inside the namespace sandbox (its /tmp)
        self.tmpfs_peak_bytes = 0  # most seen in the sandbox's /tmp and /dev/shm
        self._own_mnt_ns = _mount_namespace(os.getpid())
        self.start = time.monotonic()
        try:
            self.popen = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=_make_preexec(limits, as_other_user),
                close_fds=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ValueError(f"cannot start {argv[0]!r}: {exc}") from exc
        self.pid = self.popen.pid
        self.pgid = self.pid  # session leader => process-group leader with the same id
        self.returncode: int | None = None
        self.root_maxrss_bytes = 0
        try:
            try:
                self.root = psutil.Process(self.pid)
            except psutil.NoSuchProcess:  # cannot happen before we reap it; be safe anyway
                self.root = None
        except BaseException:  # e.g. KeyboardInterrupt before supervision starts: no orphan
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
            self.popen.wait()
            raise

    # -- waiting ---------------------------------------------------------------------------

    def run(
        self, cancel: threading.Event | None, cancel_after_s: float | None = None
    ) -> tuple[int | None, float, str | None, float | None]:
        """Wait for the program, enforce limits, always clean up the tree; stop it when
        ``cancel`` is set or ``cancel_after_s`` (shorter than its time limit) passes.

        Returns:
            ``(returncode, runtime_s, stop_reason, peak_rss_mb)`` where ``stop_reason`` is
            ``None`` (exited by itself), ``"timeout"``, ``"cancel"``, ``"memory"``, ``"disk"``
            or ``"processes"`` (what was measured then is in :attr:`stop_detail`).
        """
        stop_reason: str | None = None
        end: float | None = None
        try:
            deadline = self.start + self.limits.timeout_s
            budget_end = cancel_after_s is not None and cancel_after_s < self.limits.timeout_s
            if budget_end:
                deadline = self.start + cancel_after_s
            next_monitor = self.start  # snapshot at once, then every MONITOR_INTERVAL_S
            next_disk = self.start + DISK_INTERVAL_S
            while True:
                if self._reap():
                    end = time.monotonic()
                    break
                now = time.monotonic()
                if now >= next_monitor:
                    next_monitor = now + MONITOR_INTERVAL_S
                    stop_reason = self._check_memory_and_processes()
                    if stop_reason:
                        break
                if self.limits.disk_mb is not None and now >= next_disk:
                    next_disk = now + DISK_INTERVAL_S
                    used = _disk_usage(self.cwd)
                    if used > self.limits.disk_mb * 2**20:
                        stop_reason, self.stop_detail = "disk", f"the workspace took {used / 2**20:.0f} MiB"
                        logger.info("pid %d: workspace %.0f MiB over the disk cap of %g MiB", self.pid, used / 2**20, self.limits.disk_mb)
                        break
                if now >= deadline:
                    stop_reason = "cancel" if budget_end else "timeout"
                    if budget_end:
                        self.stop_detail = f"stopped after {cancel_after_s:.0f}s: the run's time budget ended"
                    break
                if cancel is not None and cancel.is_set():
                    stop_reason = "cancel"
                    break
                wait = max(0.0, min(POLL_INTERVAL_S, deadline - now))
                if cancel is not None:
                    if cancel.wait(wait):
                        continue  # handled at the top of the next iteration, after a reap
                else:
                    time.sleep(wait)
            if stop_reason is not None:
                end = time.monotonic()
                # Runaways get no grace: every second more may take the machine down.
                self._stop_tree(grace=0.0 if stop_reason in ("memory", "disk", "processes") else KILL_GRACE_S)
            else:
                self._stop_tree(grace=KILL_GRACE_S)  # leftovers of a program that exited
        except BaseException:
            logger.warning("pid %d: interrupted while waiting; stopping its process tree", self.pid)
            try:
                self._stop_tree(grace=KILL_GRACE_S)
            except KeyboardInterrupt:
                self._stop_tree(grace=0.0)
            raise
        runtime = (end if end is not None else time.monotonic()) - self.start
        peak = max(self.peak_rss_bytes, self.root_maxrss_bytes)
        return self.returncode, runtime, stop_reason, (peak / 2**20 if peak else None)

    def _reap(self) -> bool:
        """Reap the main process if it has exited; True when it has.

        Uses ``os.wait4`` rather than ``Popen.poll`` to get the child's own ``ru_maxrss``,
        which covers programs that finish between two watchdog samples.
        """
        if self.returncode is not None:
            return True
        try:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere; fall back to Popen's record
            self.returncode = self.popen.poll()
            if self.returncode is None:
                self.returncode = -1
            return True
        if pid == 0:
            return False
        self.returncode = os.waitstatus_to_exitcode(status)
        self.popen.returncode = self.returncode  # keep the Popen object consistent
        self.root_maxrss_bytes = usage.ru_maxrss * 1024  # KiB on Linux
        return True

    def _check_memory_and_processes(self) -> str | None:
        """One watchdog look at the tree: ``"processes"`` past ``max_processes``, ``"memory"``
        past ``memory_mb`` (PSS plus the sandbox's tmpfs, see the module docstring), else None."""
        rss, count = self._snapshot()
        if count > self.limits.max_processes:
            self.stop_detail = f"{count} processes"
            logger.info("pid %d: %d processes, over the limit of %d", self.pid, count, self.limits.max_processes)
            return "processes"
        limit = self.limits.memory_mb
        if limit is None:
            return None
        tmpfs = self._tmpfs_bytes()
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss + tmpfs)
        if rss + tmpfs <= limit * 2**20:  # resident sizes bound PSS from above: nothing to measure
            return None
        pss = self._pss_bytes()
        if pss + tmpfs <= limit * 2**20:
            return None
        self.stop_detail = f"{pss / 2**20:.0f} MiB in processes" + (f" and {tmpfs / 2**20:.0f} MiB in /tmp and /dev/shm" if tmpfs else "")
        logger.info("pid %d: %s, over the %d MiB limit", self.pid, self.stop_detail, limit)
        return "memory"

    def _members(self) -> list[psutil.Process]:
        members: list[psutil.Process] = list(self.tracked.values())
        if self.returncode is None and self.root is not None:
            members.append(self.root)
        return members

    def _pss_bytes(self) -> int:
        """The tree's proportional set size without shared-memory pages (counted with the tmpfs
        they live in), from ``/proc/PID/smaps_rollup``; a process whose map cannot be read
        counts with its resident set size."""
        total = 0
        for proc in self._members():
            try:
                total += _pss_of(proc)
            except (psutil.Error, OSError):
                pass
        return total

    def _tmpfs_bytes(self) -> int:
        """Bytes used in the namespace sandbox's private ``/tmp`` and ``/dev/shm`` (tmpfs, so
        memory), read through ``/proc/PID/root`` of a process inside it; 0 outside it."""
        if self.limits.isolation != ISOLATION_NAMESPACES or self.limits.memory_mb is None:
            return 0
        size = int(self.limits.memory_mb) * 2**20  # each was mounted with this size (bwrap --size)
        pids = ([self._tmpfs_pid] if self._tmpfs_pid else []) + [p.pid for p in self.tracked.values()]
        for pid in pids:
            if _mount_namespace(pid) in (None, self._own_mnt_ns):
                continue
            try:
                used = 0
                for mount in ("tmp", "dev/shm"):
                    st = os.statvfs(f"/proc/{pid}/root/{mount}")
                    if abs(st.f_blocks * st.f_frsize - size) > 2**20:  # not (yet) the sandbox's tmpfs
                        raise OSError("not the sandbox's tmpfs")
                    used += (st.f_blocks - st.f_bfree) * st.f_frsize
            except OSError:
                continue
            self._tmpfs_pid = pid
            self.tmpfs_peak_bytes = max(self.tmpfs_peak_bytes, used)
            return used
        return 0

    def _snapshot(self) -> tuple[int, int]:
        """Record every live descendant; return the tree's total RSS in bytes and its number of
        live processes.

        Descendants are found by parent pid from the main process and from every process seen
        before, so a grandchild stays tracked after its parent died or it left the session.
        """
        children: dict[int, list[int]] = {}
        for proc in psutil.process_iter(["ppid"]):
            ppid = proc.info.get("ppid")
            if ppid is not None:
                children.setdefault(ppid, []).append(proc.pid)
        roots = [self.pid] if self.returncode is None else []
        roots += [pid for pid, p in self.tracked.items() if _alive(p)]
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            pid = stack.pop()
            if pid in seen:
                continue
            seen.add(pid)
            stack.extend(children.get(pid, ()))
        for pid in seen:
            if pid == self.pid or pid in self.tracked:
                continue
            try:
                self.tracked[pid] = psutil.Process(pid)
            except psutil.Error:
                pass
        total = count = 0
        for proc in self._members():
            try:
                if proc.is_running():
                    total += proc.memory_info().rss
                    count += 1
            except psutil.Error:
                pass
        self.peak_rss_bytes = max(self.peak_rss_bytes, total)
        return total, count

    # -- killing ---------------------------------------------------------------------------

    def _marked(self) -> list[psutil.Process]:
        """Processes (other than this one) whose environment carries this run's marker."""
        needle = self.marker
        found = []
        me = os.getpid()
        for proc in psutil.process_iter():
            if proc.pid == me:
                continue
            try:
                if proc.environ().get(MARKER_ENV) == needle:
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def _targets(self) -> list[psutil.Process]:
        procs: dict[int, psutil.Process] = {}
        if self.returncode is None and self.root is not None:
            procs[self.pid] = self.root
        for pid, proc in self.tracked.items():
            procs.setdefault(pid, proc)
        for proc in self._marked():
            procs.setdefault(proc.pid, proc)
        return [p for p in procs.values() if _alive(p)]

    def _signal_all(self, sig: int, procs: Iterable[psutil.Process]) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for proc in procs:
            try:
                proc.send_signal(sig)  # psutil refuses if the pid was reused
            except psutil.Error:
                pass

    def _stop_tree(self, grace: float) -> None:
        """Stop every process of the tree: SIGTERM, wait ``grace``, SIGKILL; reap the root."""
        self._snapshot()
        procs = self._targets()
        root_alive = self.returncode is None
        if procs or root_alive:
            if grace > 0:
                self._signal_all(signal.SIGTERM, procs)
                procs = self._wait_gone(procs, grace)
            if procs or not self._reap():
                self._snapshot()
                procs = self._targets()  # late forks during the grace period
                self._signal_all(signal.SIGKILL, procs)
                procs = self._wait_gone(procs, KILL_WAIT_S)
        if not self._reap():
            try:
                self.popen.wait(timeout=KILL_WAIT_S)
            except Exception:  # noqa: BLE001 - never raise from cleanup
                logger.error("pid %d did not exit after SIGKILL", self.pid)
            self.returncode = self.popen.returncode
        # A last sweep for anything forked between the snapshot and the kill.
        leftovers = [p for p in self._targets() if p.pid != self.pid]
        if leftovers:
            self._signal_all(signal.SIGKILL, leftovers)
            leftovers = self._wait_gone(leftovers, KILL_WAIT_S)
        if leftovers:
            logger.error(
                "pid %d: processes %s survived SIGKILL", self.pid, [p.pid for p in leftovers]
            )

    def _wait_gone(self, procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
        """Wait until ``procs`` and the root are gone or zombies; return the survivors.

        ``psutil.wait_procs`` waits for zombies of processes we are not the parent of, which
        only their new parent (init) can reap; this loop counts zombies as gone.
        """
        deadline = time.monotonic() + timeout
        while True:
            root_done = self._reap()
            procs = [p for p in procs if p.pid != self.pid and _alive(p)]
            if (root_done and not procs) or time.monotonic() >= deadline:
                return procs
            time.sleep(0.05)


def _alive(proc: psutil.Process) -> bool:
    """True when ``proc`` is still running (the same process, not a zombie)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _mount_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def _pss_of(proc: psutil.Process) -> int:
    """``Pss - Pss_Shmem`` of one process in bytes (``/proc/PID/smaps_rollup``, Linux 4.14+;
    ``Pss_Shmem`` since 5.9), its RSS where the file is missing."""
    fields: dict[str, int] = {}
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                name, _, rest = line.partition(b":")
                if name in (b"Pss", b"Pss_Shmem"):
                    fields[name.decode()] = int(rest.split()[0]) * 1024
    except FileNotFoundError:
        return proc.memory_info().rss
    if "Pss" not in fields:
        return proc.memory_info().rss
    return fields["Pss"] - fields.get("Pss_Shmem", 0)


def _disk_usage(folder: Path) -> int:
    from mcgs.candidate_files import disk_usage_bytes

    return disk_usage_bytes(folder)


# --------------------------------------------------------------------------------------------
# Output and classification


def _fresh_logs(workspace: Path) -> tuple[int, int]:
    """Create ``logs/stdout.txt`` and ``logs/stderr.txt`` anew and return descriptors open for
    reading and writing. Whatever stands at those paths (a link, a folder, a FIFO an earlier
    attempt left) is removed first and the files are created with ``O_EXCL | O_NOFOLLOW``, so
    the engine never writes through a link."""
    from mcgs.candidate_files import remove_tree

    logs = workspace / "logs"
    if logs.is_symlink() or (logs.exists() and not logs.is_dir()):
        logs.unlink()
    logs.mkdir(exist_ok=True)
    dfd = os.open(logs, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    fds: list[int] = []
    try:
        for name in ("stdout.txt", "stderr.txt"):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISDIR(st.st_mode):
                    remove_tree(logs / name)
                else:
                    os.unlink(name, dir_fd=dfd)
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fds.append(os.open(name, flags, 0o644, dir_fd=dfd))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    finally:
        os.close(dfd)
    return fds[0], fds[1]


def _read_tail(fd: int, chars: int) -> str:
    """The last ``chars`` characters of the UTF-8 text behind ``fd`` (bad bytes replaced)."""
    if chars <= 0:
        return ""
    try:
        size = os.fstat(fd).st_size
        # UTF-8 uses at most 4 bytes per character.
        start = max(0, size - 4 * chars)
        data = os.pread(fd, size - start, start)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-chars:]


def _parse_traceback(stderr: str, max_chars: int) -> tuple[str | None, str | None]:
    """Find the last Python error report in ``stderr``.

    Three shapes are recognised, the last one printed wins:

    * a traceback: the exception line is the first unindented line after the last
      ``Traceback (most recent call last):`` header (the ``Type: message`` line);
    * a faulthandler report (``Fatal Python error: Segmentation fault`` followed by frames),
      printed on crashes because the sandbox sets ``PYTHONFAULTHANDLER=1``;
    * frames without a header, which is how a ``SyntaxError`` in the script itself is
      printed: the exception line is the first unindented line after the first frame.

    Args:
        stderr: The text to search (usually the stderr tail).
        max_chars: Cap on the returned traceback text.

    Returns:
        ``(exception_line, traceback_tail)``, or ``(None, None)`` when nothing is found.
    """
    lines = stderr.splitlines()
    start = None
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith((_TRACEBACK_HEADER, _FATAL_HEADER)):
            start = i
            break
    if start is not None and lines[start].startswith(_FATAL_HEADER):
        exc_line: str | None = lines[start].strip()
        first_block = start
    else:
        if start is None:
            start = next((i for i, line in enumerate(lines) if line.startswith('  File "')), None)
            if start is None:
                return None, None
        exc_line = next(
            (line.strip() for line in lines[start + 1 :] if line.strip() and not line[0].isspace()),
            None,
        )
        if exc_line is None:
            return None, None
        first_block = start
    block = "\n".join(lines[first_block:])
    return exc_line, block[-max_chars:] if max_chars > 0 else ""


def _last_line(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _shorten(text: str | None) -> str | None:
    if text is None or len(text) <= ERROR_MAX_CHARS:
        return text
    return text[: ERROR_MAX_CHARS - 3] + "..."


def _classify(
    returncode: int | None,
    stop_reason: str | None,
    stderr_tail: str,
    limits: SandboxLimits,
    runtime_s: float,
    detail: str | None = None,
    tmpfs_full: bool = False,
) -> tuple[Outcome, str | None, str | None]:
    """Turn how the run ended into ``(outcome, error, traceback_tail)``.

    Order: a stop by the sandbox decides (timeout, cancel, memory, disk and process watchdogs;
    ``detail`` says what was measured); then exit code 0 is ``OK``; a non-zero exit is
    ``DISK`` when the last error is a write refused as too large (``RLIMIT_FSIZE``) or for want
    of space (but ``OOM`` when no space was left because the sandbox's ``/tmp`` and ``/dev/shm``,
    which are memory, held at least a quarter of the memory limit: ``tmpfs_full``), ``PROCESS_LIMIT`` when it is a process or thread that could not be started
    (``EAGAIN`` from ``fork``/``clone``), ``OOM`` when stderr shows an out-of-memory error or the
    process died of a SIGKILL the sandbox did not send (the kernel OOM killer), else ``BUGGY``.
    """
    mem = (
        f"memory limit of {limits.memory_mb} MB exceeded"
        if limits.memory_mb is not None
        else "out of memory"
    )
    disk = f"disk cap of {limits.disk_mb:g} MiB exceeded" if limits.disk_mb is not None else "no space left for the workspace"
    procs = f"process limit of {limits.max_processes} reached"
    measured = f" ({detail})" if detail else ""
    if stop_reason == "timeout":
        return Outcome.TIMEOUT, f"timed out after {limits.timeout_s:.1f} s", None
    if stop_reason == "cancel":
        return Outcome.CANCELLED, detail or f"cancelled after {runtime_s:.1f} s", None
    if stop_reason == "memory":
        return Outcome.OOM, mem + measured, None
    if stop_reason == "disk":
        return Outcome.DISK, disk + measured, None
    if stop_reason == "processes":
        return Outcome.PROCESS_LIMIT, procs + measured, None
    if returncode == 0:
        return Outcome.OK, None, None

    exc_line, tb = _parse_traceback(stderr_tail, limits.tail_chars)
    last = exc_line if exc_line is not None and not exc_line.startswith(_FATAL_HEADER) else (_last_line(stderr_tail) or "")
    if tmpfs_full and _NO_SPACE.search(last):
        return Outcome.OOM, _shorten(f"{mem} (/tmp and /dev/shm are memory and ran full: {last})"), tb
    if _DISK_SIGN.search(last) or returncode == -signal.SIGXFSZ:
        return Outcome.DISK, _shorten(f"{disk} ({last or 'killed by SIGXFSZ'})"), tb
    if _PROCESS_SIGN.search(last):
        return Outcome.PROCESS_LIMIT, _shorten(f"{procs} ({last})"), tb
    # The last exception decides; without one (or after a hard crash), any sign in stderr.
    oom_sign = None
    if exc_line is not None and (_OOM_EXCEPTION.search(exc_line) or _OOM_ANYWHERE.search(exc_line)):
        oom_sign = exc_line
    elif exc_line is None or exc_line.startswith(_FATAL_HEADER):
        match = _OOM_ANYWHERE.search(stderr_tail) or _OOM_EXCEPTION.search(
            _last_line(stderr_tail) or ""
        )
        if match is not None:
            oom_sign = match.group(0)
    if oom_sign is not None:
        return Outcome.OOM, _shorten(f"{mem} ({oom_sign})"), tb
    if returncode == -signal.SIGKILL:
        return Outcome.OOM, "killed by SIGKILL (probably the kernel OOM killer)", tb
    if exc_line is not None:
        return Outcome.BUGGY, _shorten(exc_line), tb
    if returncode is not None and returncode < 0:
        detail = _last_line(stderr_tail)
        reason = f"killed by {_signal_name(returncode)}"
        return Outcome.BUGGY, _shorten(f"{reason}: {detail}" if detail else reason), None
    detail = _last_line(stderr_tail)
    return Outcome.BUGGY, _shorten(detail or f"exited with code {returncode}"), None
