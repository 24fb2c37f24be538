"""One engine per run folder.

The process that runs a search (``mcgs run``, ``mcgs resume``, :meth:`mcgs.search.Search.run`)
holds an advisory ``flock`` on ``RUN_DIR/engine.lock`` for as long as it searches, with its pid,
host and start time written in the file. The kernel drops the lock when the process ends, however
it ends (SIGKILL and power loss included), so the lock says whether an engine is alive without
trusting the run's stored status, which a killed engine cannot update:

* a second engine on the same run is refused (two engines race on the clock, the final ensemble
  and ``best/``); more workers join through ``mcgs worker``, which takes no engine lock;
* ``mcgs status`` tells a run whose engine is gone from one that is running.

Linux ``flock`` locks are per open file description and are not inherited across ``exec``
(Python opens files non-inheritable, PEP 446), so candidate processes never hold it. On NFS
(v4) the lock holds across machines sharing the folder.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import IO

__all__ = ["LOCK_NAME", "EngineBusy", "acquire", "engine_holder", "has_lock_file"]

LOCK_NAME = "engine.lock"
#: Seconds an engine waits for the lock before it is refused: longer than any reader's check.
CHECK_WAIT_S = 1.0


class EngineBusy(RuntimeError):
    """Another live process holds the run folder's engine lock.

    Attributes:
        holder: What the holder wrote: ``{"pid", "host", "started"}`` (empty when unreadable).
    """

    def __init__(self, run_dir: Path, holder: dict):
        self.holder = holder
        who = (f"process {holder.get('pid')} on {holder.get('host')} (since {holder.get('started')})"
               if holder else "another process")
        super().__init__(
            f"the run in {run_dir} is being searched by {who}; one engine per run. Add workers to it "
            f"with `mcgs worker --artifacts {run_dir}`, or stop that engine (Ctrl-C, or kill "
            f"{holder.get('pid', 'PID')}) and then resume"
        )


def _read(fh: IO[str]) -> dict:
    fh.seek(0)
    try:
        data = json.loads(fh.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def acquire(run_dir: Path) -> IO[str]:
    """Take the engine lock of ``run_dir`` (created if missing) and write this process's pid,
    host and start time in it.

    Returns:
        The open lock file: the lock is held until it is closed (or the process ends).

    Raises:
        EngineBusy: another live process holds it.
        OSError: the folder cannot be written.
    """
    import time

    fh = open(Path(run_dir) / LOCK_NAME, "a+", encoding="utf-8")
    deadline = time.monotonic() + CHECK_WAIT_S
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            # a reader's check (engine_holder: `mcgs status`, a second resume) holds the lock
            # shared for an instant; an engine holds it for as long as it lives
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            holder = _read(fh)
            fh.close()
            raise EngineBusy(Path(run_dir), holder) from None
    fh.seek(0)
    fh.truncate()
    fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                         "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}))
    fh.flush()
    return fh


def engine_holder(run_dir: Path) -> dict | None:
    """Who holds the engine lock of ``run_dir`` right now.

    Returns:
        ``{"pid", "host", "started"}`` (empty if unreadable) when a live process holds it, and
        None when none does or there is no lock file (a run no engine of this version has run:
        :func:`has_lock_file` tells the two apart).
    """
    path = Path(run_dir) / LOCK_NAME
    try:
        fh = open(path, encoding="utf-8")
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fh)
        fcntl.flock(fh, fcntl.LOCK_UN)
        return None


def has_lock_file(run_dir: Path) -> bool:
    """True when an engine of this version has run ``run_dir`` (so :func:`engine_holder`
    returning None means the engine is gone)."""
    return (Path(run_dir) / LOCK_NAME).is_file()
