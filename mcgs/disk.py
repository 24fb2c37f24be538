"""Disk space of a run: a floor below which the search pauses, and writes that find the disk full.

A run pauses rather than fails when its disk fills up: before each candidate while the free
space is under ``min_free_disk_mb`` (:meth:`DiskGuard.wait_for_floor`), and wherever a write of
the engine (the storage, a workspace, ``best/``) fails for want of space
(:meth:`DiskGuard.wait_for_space`). Paused time is not charged to the budget. The floor can be
changed while the run is live (``mcgs set RUN_DIR min_free_disk_mb=N`` writes
``RUN_DIR/overrides.json``, read at each check).
"""

from __future__ import annotations

import errno
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

from mcgs.node import RunStatus
from mcgs.run_folder import DISK_POLL_S, FULL_DISK_MIN_MB, FULL_DISK_RESUME_MB, LIVE_SETTINGS, OVERRIDES_NAME

__all__ = ["DiskGuard", "live_setting", "set_live_setting", "workspace_cap_mb"]


def live_setting(run_dir: Path, settings, name: str):
    """A setting as it is now: ``RUN_DIR/overrides.json`` (written by ``mcgs set``) wins over
    the run's stored ``settings``. Only :data:`mcgs.run_folder.LIVE_SETTINGS` can be overridden;
    an unreadable overrides file is ignored."""
    path = Path(run_dir) / OVERRIDES_NAME
    if name in LIVE_SETTINGS and path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        if name in data:
            return type(getattr(settings, name))(data[name])
    return getattr(settings, name)


def set_live_setting(run_dir: Path, assignment: str) -> tuple[str, Any]:
    """Change a setting of a live run (``mcgs set RUN_DIR NAME=VALUE``): written to
    ``RUN_DIR/overrides.json``, which a running search reads before its next candidate and a
    stopped one on resume (:func:`live_setting`).

    Returns:
        ``(name, value)`` as parsed by the setting's own validation.

    Raises:
        ValueError: not ``NAME=VALUE``, a setting that cannot change while a run is live
            (only :data:`mcgs.run_folder.LIVE_SETTINGS`), a value the setting refuses, or an
            ``overrides.json`` that is not a JSON object.
        mcgs.run_folder.RunError: no run in ``run_dir``.
    """
    import os

    from pydantic import ValidationError

    from mcgs.run_folder import locate_run
    from mcgs.settings import SearchSettings

    name, sep, value = assignment.partition("=")
    name = name.strip()
    if not sep or name not in LIVE_SETTINGS:
        raise ValueError(f"give NAME=VALUE with NAME one of {', '.join(LIVE_SETTINGS)} (got {assignment!r})")
    try:
        parsed = getattr(SearchSettings(**{name: value}), name)
    except ValidationError as exc:
        raise ValueError(f"{name}={value!r}: {exc.errors()[0]['msg']}") from None
    locate_run(run_dir, read_only=True)[0].close()  # a run is there and its storage opens
    path = Path(run_dir) / OVERRIDES_NAME
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError as exc:
        data = exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object of settings ({data}); delete it and run `mcgs set` again")
    data[name] = parsed
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)
    return name, parsed


def workspace_cap_mb(run_dir: Path, settings) -> float:
    """The disk cap of one candidate's workspace, MiB: the ``disk_mb`` setting, or half of the
    free space above the floor (``min_free_disk_mb``, live) on the run's disk now, shared among
    the workers (at least 256 MiB)."""
    if settings.disk_mb is not None:
        return settings.disk_mb
    free = shutil.disk_usage(run_dir).free / 2**20
    floor = float(live_setting(run_dir, settings, "min_free_disk_mb"))
    return max(256.0, (free - floor) / (2 * settings.workers))


class DiskGuard:
    """Pauses a run while its disk is (nearly) full.

    Args:
        run_dir: The run directory (its disk is the one watched).
        storage: The run's storage (status ``paused`` / ``running`` is stored there).
        run_id: The run's id in it.
        clock: The run's :class:`mcgs.budget.Clock`; paused seconds go to ``paused_s``.
        stop: Set when the run is asked to stop: a pause ends with KeyboardInterrupt.
        say: Prints a one-line message for the user (looked up at each call).
        settings: Returns the run's settings now (``min_free_disk_mb``, ``disk_mb``, ``workers``).
        read_only: A reader's guard: a write that fails is never retried.
    """

    def __init__(self, run_dir: Path, storage, run_id: int, clock, stop: threading.Event, say: Callable[[str], None],
                 settings: Callable[[], Any], read_only: bool = False):
        self.run_dir, self.storage, self.run_id, self.clock = run_dir, storage, run_id, clock
        self.stop, self.say, self.settings, self.read_only = stop, say, settings, read_only
        self._lock = threading.Lock()  # one pause at a time for a full disk
        self._retries = 0  # writes that failed for a full disk while it had room

    def floor_mb(self) -> float:
        """The free-space floor now, MiB (``min_free_disk_mb``, live)."""
        return float(live_setting(self.run_dir, self.settings(), "min_free_disk_mb"))

    def cap_mb(self) -> float:
        """The disk cap of one candidate's workspace now, MiB (:func:`workspace_cap_mb`)."""
        return workspace_cap_mb(self.run_dir, self.settings())

    def wait_for_floor(self) -> None:
        """Pause (without charging the budget) while the run's disk has less free space than
        ``min_free_disk_mb``; return when space is freed or the floor lowered (``mcgs set``).

        Raises:
            KeyboardInterrupt: the run is being stopped while it waits.
        """
        paused = False
        while True:
            floor = self.floor_mb()
            free = shutil.disk_usage(self.run_dir).free / 2**20
            if free >= floor:
                if paused:
                    self.storage.update_run(self.run_id, status=RunStatus.RUNNING)
                    self.say(f"{free:.0f} MB free, at or above the floor of {floor:.0f} MB: the run continues")
                return
            if not paused:
                paused = True
                self.storage.update_run(self.run_id, status=RunStatus.PAUSED)
                self.say(
                    f"paused: {free:.0f} MB free on the disk of {self.run_dir}, below the floor of {floor:.0f} MB "
                    f"(min_free_disk_mb); free some space, or lower the floor with `mcgs set {self.run_dir} min_free_disk_mb=N`"
                )
            t0 = time.monotonic()
            stopped = self.stop.wait(DISK_POLL_S)
            self.clock.paused_s += time.monotonic() - t0
            if stopped:
                raise KeyboardInterrupt("stop requested")

    def wait_for_space(self, full) -> None:
        """What the storage calls when a write finds the disk full (``Storage.on_full``), and the
        engine when a file it writes does: pause (not charged to the budget) until
        ``min(min_free_disk_mb, FULL_DISK_RESUME_MB)`` (at least ``FULL_DISK_MIN_MB``) are free,
        saying which path is full, then return so the write is tried again. Called from any
        thread; one pause at a time.

        Args:
            full: The :class:`mcgs.storage.StorageFull` that the write raised (its ``path``).

        Raises:
            KeyboardInterrupt: the run is being stopped (Ctrl-C) while it waits.
            StorageFull: the write failed again although the disk has that much free (a quota,
                or a storage limit other than the disk): waiting would not help.
        """
        with self._lock:
            folder = Path(full.path).parent if self.storage.is_sqlite or Path(full.path).is_absolute() else self.run_dir
            if not folder.is_dir():
                folder = self.run_dir
            need = max(FULL_DISK_MIN_MB, min(self.floor_mb(), FULL_DISK_RESUME_MB))
            paused = False
            while True:
                if self.stop.is_set():
                    raise KeyboardInterrupt("stop requested")
                free = shutil.disk_usage(folder).free / 2**20
                if free >= need:
                    if paused:
                        self._retries = 0
                        self.say(f"{free:.0f} MB free on the disk holding {full.path}: the run continues")
                        return
                    self._retries += 1
                    if self._retries > 3:  # not the disk: waiting will not help
                        self._retries = 0
                        raise full
                    return
                if not paused:
                    paused = True
                    self.say(f"paused: the disk holding {full.path} is full ({free:.0f} MB free), so the engine cannot write "
                             f"there; free some space and the run continues by itself once {need:.0f} MB are free (nothing is "
                             f"lost; Ctrl-C stops it, and `mcgs resume {self.run_dir}` goes on later)")
                t0 = time.monotonic()
                self.stop.wait(DISK_POLL_S)
                self.clock.paused_s += time.monotonic() - t0

    def with_space(self, write: Callable[[], Any], where: Path) -> Any:
        """``write()``, paused and tried again while it fails for a full disk
        (:meth:`wait_for_space`); ``where`` names the path in the message."""
        from mcgs.storage import StorageFull

        while True:
            try:
                return write()
            except OSError as exc:
                if exc.errno != errno.ENOSPC or self.read_only:
                    raise
                self.wait_for_space(StorageFull(str(where), exc.strerror or "no space left on device"))
