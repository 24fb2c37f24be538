"""The cores a candidate may use: other processes' load counts, the engine's own tree does not."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

from mcgs.sandbox import CoreMonitor
from mcgs.sandbox.cores import other_busy_cores

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def _spin_here(seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        pass


def _outside_spinner() -> int:
    """A busy process that is not a descendant of this one (its parent exits at once), as
    another user's job would be. Returns its pid."""
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c '{SPIN}' >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_the_engines_own_children_count_as_its_own_load():
    """The CPU time a candidate (a child) spends is the engine's own, so it is not taken for
    another process's load: measured in the same window as the machine's, whatever else runs."""
    from mcgs.sandbox.cores import _busy_cpu_s, _own_cpu_s

    own = multiprocessing.Process(target=_spin_here, args=(2.5,))
    own.start()
    try:
        time.sleep(0.3)
        busy0, own0, t0 = _busy_cpu_s(), _own_cpu_s(), time.monotonic()
        time.sleep(1.5)
        busy1, own1, t1 = _busy_cpu_s(), _own_cpu_s(), time.monotonic()
    finally:
        own.join()
    ours = (own1 - own0) / (t1 - t0)
    assert ours > 0.4, ours  # the spinning child is counted as ours
    assert (busy1 - busy0) / (t1 - t0) >= ours - 0.2  # and it is part of what the machine was busy with
    # a finished child keeps counting (its time moves to the parent's reaped-children time)
    assert _own_cpu_s() >= own1 - 0.05


def test_another_process_load_counts():
    import pytest

    from mcgs.sandbox import available_cores

    before = other_busy_cores(1.0)
    if before > available_cores() - 1.2:
        pytest.skip(f"{before:.1f} of {available_cores()} cores are busy with other work: no free core to watch being taken")
    pid = _outside_spinner()
    try:
        time.sleep(0.3)
        during_other = other_busy_cores(1.0)
        monitor = CoreMonitor(interval_s=0.5).start()
        time.sleep(2.5)
        seen = monitor._others
        monitor.stop()
    finally:
        os.kill(pid, signal.SIGKILL)
    assert during_other - before > 0.6, (before, during_other)  # one more busy core elsewhere
    # the monitor sees the spinner too; how much of the rest it sees depends on what else the
    # machine (a CI runner with a second test worker) does meanwhile, so only the spinner's
    # share is asserted, and that it costs the candidate a thread
    assert seen > 0.5, (before, seen)
    assert monitor.free() < available_cores()
