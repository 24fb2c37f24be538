"""How many cores a candidate may use now: the cores free of other processes, not the cores present.

On a machine shared with other work, a candidate that starts as many threads as there are cores
runs each parallel region at the pace of its thread that shares a core, and OpenMP threads that
spin while they wait make that worse (issue 33: a LightGBM draft took 127 s beside other work
against 8-12 s on an idle machine). The engine therefore gives a candidate no more threads than
the cores other processes leave free, measured from the CPU time of the cores it may run on less
the CPU time of the engine's own process tree (its candidates do not count against themselves).
Making OpenMP threads sleep instead of spin (``OMP_WAIT_POLICY=PASSIVE``) is not the answer: it
made the default LightGBM program 3.5x slower on an idle machine (68 s against 19 s on
bird_strike_phase, 2 cores), since every barrier then costs a sleep and a wake-up.
``experiments/busy_machine.py`` measures the thread rule against both.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["available_cores", "other_busy_cores", "free_cores", "CoreMonitor", "shared_monitor"]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity; ``os.cpu_count()`` where unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_cpu_s() -> float:
    """CPU seconds of this process's tree: its own and every live descendant's, each with the
    time of the children it has reaped (so a candidate that exits keeps counting as ours)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def _busy_cpu_s() -> float:
    """CPU seconds the cores this process may run on have spent not idle since boot (the other
    cores of a large shared host do not count)."""
    import psutil

    per_cpu = psutil.cpu_times(percpu=True)
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        mine = range(len(per_cpu))
    return sum(sum(per_cpu[i]) - per_cpu[i].idle - getattr(per_cpu[i], "iowait", 0.0) for i in mine if i < len(per_cpu))


def other_busy_cores(window_s: float = 0.5) -> float:
    """Cores (of those this process may run on) busy with processes outside this process's
    tree, averaged over ``window_s`` seconds."""
    busy0, own0, t0 = _busy_cpu_s(), _own_cpu_s(), time.monotonic()
    time.sleep(window_s)
    busy1, own1, t1 = _busy_cpu_s(), _own_cpu_s(), time.monotonic()
    return max(0.0, (busy1 - busy0) - (own1 - own0)) / max(t1 - t0, 1e-3)


def free_cores(window_s: float = 0.5) -> int:
    """Cores that other processes leave free, measured over ``window_s`` seconds: the cores
    available less :func:`other_busy_cores`, rounded, at least 1."""
    return max(1, int(available_cores() - other_busy_cores(window_s) + 0.5))


class CoreMonitor:
    """Samples the cores other processes leave free, every ``interval_s`` seconds, in a
    background thread; :meth:`free` answers at once with the smoothed value.

    The estimate is an exponential moving average (weight ``alpha`` on the newest sample) of
    the cores busy with other processes, so one short burst does not halve a candidate's
    threads and a lasting load is seen within a few samples.

    Args:
        interval_s: Seconds between samples.
        alpha: Weight of the newest sample in the average.
    """

    def __init__(self, interval_s: float = 1.0, alpha: float = 0.5):
        self.interval_s, self.alpha = interval_s, alpha
        self._others = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "CoreMonitor":
        """Start sampling unless it runs already; returns self."""
        if self._thread is None:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._loop, args=(self._stop,), name="mcgs-core-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (a later :meth:`start` starts again)."""
        self._stop.set()
        self._thread = None

    def _loop(self, stop: threading.Event) -> None:
        busy0, own0, t0 = _busy_cpu_s(), _own_cpu_s(), time.monotonic()
        while not stop.wait(self.interval_s):
            busy1, own1, t1 = _busy_cpu_s(), _own_cpu_s(), time.monotonic()
            others = max(0.0, (busy1 - busy0) - (own1 - own0)) / max(t1 - t0, 1e-3)
            self._others = self.alpha * others + (1 - self.alpha) * self._others
            busy0, own0, t0 = busy1, own1, t1

    def free(self) -> int:
        """Cores free of other processes now (smoothed), at least 1."""
        return max(1, int(available_cores() - self._others + 0.5))


_SHARED: CoreMonitor | None = None
_SHARED_LOCK = threading.Lock()


def shared_monitor() -> CoreMonitor:
    """The process's one :class:`CoreMonitor`, started on first use: every search in a process
    reads it (one sampling thread, not one per search)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = CoreMonitor().start()
        return _SHARED
