"""How a program run ended, as data: the :class:`Outcome` and the :class:`ExecutionResult`
the sandbox returns, and the rules that turn an exit code, a stop by the supervisor and stderr
into them (:func:`classify`)."""

from __future__ import annotations

import enum
import re
import signal
from dataclasses import dataclass

from mcgs.sandbox.limits import SandboxLimits

__all__ = ["Outcome", "ExecutionResult", "result_of_run", "classify", "ERROR_MAX_CHARS"]

#: Longest ``error`` string kept in a result.
ERROR_MAX_CHARS = 500

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
        gpus: The GPUs the program was handed (``SandboxLimits.gpus``).
        peak_gpu_mb: The most GPU memory its processes held, MiB, sampled with nvidia-smi every
            few seconds; None without a GPU (or when nvidia-smi could not say).
    """

    outcome: Outcome
    returncode: int | None
    runtime_s: float
    stdout_tail: str
    stderr_tail: str
    error: str | None
    traceback_tail: str | None
    peak_rss_mb: float | None
    gpus: tuple[int, ...] = ()
    peak_gpu_mb: float | None = None


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
    outcome, error, tb = classify(returncode, stop_reason, err, limits, runtime_s)
    return ExecutionResult(outcome=outcome, returncode=returncode, runtime_s=runtime_s, stdout_tail=out, stderr_tail=err,
                           error=error, traceback_tail=tb, peak_rss_mb=None)


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


def classify(
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
