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


def test_the_engines_own_children_do_not_count_as_other_load():
    before = other_busy_cores(1.0)
    own = multiprocessing.Process(target=_spin_here, args=(3.0,))
    own.start()
    try:
        time.sleep(0.3)
        during_own = other_busy_cores(1.0)
    finally:
        own.join()
    assert during_own - before < 0.4, (before, during_own)  # a candidate does not count against itself


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
    assert seen - before > 0.5 and monitor.free() >= 1
