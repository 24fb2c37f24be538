"""What a program run may use: :class:`SandboxLimits` and the isolation levels."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SandboxLimits", "ISOLATION_NAMESPACES", "ISOLATION_SESSION", "MAX_PROCESSES", "MAX_FILE_MB", "DISK_INTERVAL_S"]

#: Isolation levels (recorded on the run).
ISOLATION_NAMESPACES = "namespaces"
ISOLATION_SESSION = "process-session"
#: User and group a program runs as in the namespace sandbox when the engine is root (nobody).
SANDBOX_UID = SANDBOX_GID = 65534
#: Default limit on processes (and, as the sandbox user, processes plus threads) of one program.
MAX_PROCESSES = 256
#: Largest file a program may write, MiB (``RLIMIT_FSIZE``).
MAX_FILE_MB = 16384

#: Seconds between measurements of the workspace's disk use (the disk cap).
DISK_INTERVAL_S = 1.0


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
        gpus: Indices of the GPUs the program may use (``CUDA_VISIBLE_DEVICES``; their device
            nodes bound into the namespace sandbox); empty: none, the program sees no GPU.
    """

    timeout_s: float
    memory_mb: int | None = 8192
    cpu_threads: int = 2
    tail_chars: int = 4000
    isolation: str = ISOLATION_SESSION
    disk_mb: float | None = None
    max_processes: int = MAX_PROCESSES
    gpus: tuple[int, ...] = ()

    @classmethod
    def for_run(cls, settings, timeout_s: float, *, isolation: str, disk_mb: float | None, threads: int | None = None,
                free_cores: int | None = None) -> "SandboxLimits":
        """The limits every run of a search's node code gets (search, ensembles, export's
        measurements): ``timeout_s`` (at least 1 s), ``settings.sandbox``'s memory limit, the
        candidate's share of the CPU threads among ``settings.workers`` but no more than
        ``free_cores`` (the cores other processes leave free, :mod:`mcgs.sandbox.cores`), or
        ``threads``; the run's resolved ``isolation`` and the workspace's ``disk_mb`` cap.

        Args:
            settings: The run's :class:`mcgs.settings.SearchSettings`.
        """
        sandbox = settings.sandbox
        share = max(1, sandbox.cpu_threads // settings.workers)
        threads = threads or max(1, min(share, free_cores or share))
        return cls(timeout_s=max(1.0, timeout_s), memory_mb=sandbox.memory_mb, cpu_threads=threads, isolation=isolation, disk_mb=disk_mb)

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
