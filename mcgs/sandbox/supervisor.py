"""The supervisor of one program: starts it in its own session, waits without busy-spinning,
enforces the time, memory, disk and process limits with watchdogs, and leaves no process of its
tree behind (:class:`Supervisor`); and the engine's view of candidate processes across runs
(:func:`owner_id`, :func:`live_candidates`, :func:`kill_candidates`)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterable

import psutil

from mcgs.sandbox.environment import MARKER_ENV, OWNER_ENV
from mcgs.sandbox.isolation import make_preexec
from mcgs.sandbox.limits import DISK_INTERVAL_S, ISOLATION_NAMESPACES, SandboxLimits

__all__ = ["Supervisor", "owner_id", "owner_alive", "live_candidates", "kill_candidates", "fresh_logs", "read_tail",
           "POLL_INTERVAL_S", "MONITOR_INTERVAL_S", "KILL_GRACE_S", "KILL_WAIT_S"]

logger = logging.getLogger("mcgs.sandbox")

#: Seconds between checks for exit and cancellation in the wait loop.
POLL_INTERVAL_S = 0.1
#: Seconds between process-tree snapshots and memory measurements (the memory watchdog).
MONITOR_INTERVAL_S = 0.2
#: Seconds between readings of the GPU memory of a program that holds a GPU (nvidia-smi).
GPU_INTERVAL_S = 2.0
#: Seconds between SIGTERM and SIGKILL when a tree is stopped.
KILL_GRACE_S = 2.0
#: Seconds to wait for processes to disappear after SIGKILL before giving up (and logging).
KILL_WAIT_S = 2.0




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


class Supervisor:
    """Owns one program's process tree from :meth:`start` until :meth:`run` returns, when no
    process of it is left.

    Args:
        argv: The command (``python solution.py``, or its bubblewrap form).
        cwd: The workspace, its working directory.
        env: Its environment (:func:`mcgs.sandbox.environment.scrubbed_env`).
        limits: The run's :class:`~mcgs.sandbox.limits.SandboxLimits`.
        marker: The token of :data:`~mcgs.sandbox.environment.MARKER_ENV` that marks its processes.
        stdout, stderr: File descriptors of its logs.
        as_other_user: Drop to the sandbox user in the child (namespace sandbox as root).
        pass_fds: Descriptors the program inherits (forecast mode's two pipes), besides its
            standard ones.
    """

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
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.limits = limits
        self.pass_fds = pass_fds
        self.marker = marker
        self.cwd = cwd
        self.tracked: dict[int, psutil.Process] = {}
        self.peak_rss_bytes = 0
        self.peak_gpu_mb: float | None = None  # sampled every GPU_INTERVAL_S when the program holds a GPU
        self.stop_detail: str | None = None  # what the watchdog measured when it stopped the tree
        self._tmpfs_pid: int | None = None  # a process inside the namespace sandbox (its /tmp)
        self.tmpfs_peak_bytes = 0  # most seen in the sandbox's /tmp and /dev/shm
        self._own_mnt_ns = _mount_namespace(os.getpid())
        self.argv, self.env, self.stdout, self.stderr, self.as_other_user = argv, env, stdout, stderr, as_other_user
        self.started_at: float | None = None  # monotonic time the program started
        self.pid = self.pgid = None
        self.returncode: int | None = None
        self.root_maxrss_bytes = 0

    def start(self) -> None:
        """Start the program in its own session under its limits.

        Raises:
            ValueError: the interpreter cannot be started.
        """
        argv, cwd, env, limits = self.argv, self.cwd, self.env, self.limits
        stdout, stderr, as_other_user = self.stdout, self.stderr, self.as_other_user
        self.started_at = time.monotonic()
        try:
            self.popen = subprocess.Popen(
                argv,
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
                preexec_fn=make_preexec(limits, as_other_user),
                close_fds=True,
                pass_fds=self.pass_fds,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ValueError(f"cannot start {argv[0]!r}: {exc}") from exc
        self.pid = self.popen.pid
        self.pgid = self.pid  # session leader => process-group leader with the same id
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
            deadline = self.started_at + self.limits.timeout_s
            budget_end = cancel_after_s is not None and cancel_after_s < self.limits.timeout_s
            if budget_end:
                deadline = self.started_at + cancel_after_s
            next_monitor = self.started_at  # snapshot at once, then every MONITOR_INTERVAL_S
            next_disk = self.started_at + DISK_INTERVAL_S
            next_gpu = self.started_at + GPU_INTERVAL_S
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
                if self.limits.gpus and now >= next_gpu:
                    next_gpu = now + GPU_INTERVAL_S
                    self._sample_gpu_memory()
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
        runtime = (end if end is not None else time.monotonic()) - self.started_at
        peak = max(self.peak_rss_bytes, self.root_maxrss_bytes)
        return self.returncode, runtime, stop_reason, (peak / 2**20 if peak else None)

    def _sample_gpu_memory(self) -> None:
        """Record the GPU memory the tree's processes hold now (:attr:`peak_gpu_mb`)."""
        from mcgs.gpus import gpu_memory_used_mb

        pids = [self.pid, *self.tracked]
        used = gpu_memory_used_mb(pids)
        if used is not None:
            self.peak_gpu_mb = max(self.peak_gpu_mb or 0.0, used)

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


def fresh_logs(workspace: Path) -> tuple[int, int]:
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


def read_tail(fd: int, chars: int) -> str:
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
