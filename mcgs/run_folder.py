"""A run's folder and where its storage is: what the engine and every reader of a run share.

A run lives in ``RUN_DIR``: ``mcgs.db`` (or ``storage.json`` naming another storage), ``input/``
(the task copy candidates read), ``nodes/<seq>/`` (workspaces), ``best/`` and ``profile.json``.
This module decides whether a folder may become a run's, finds and opens a run's storage
(:func:`locate_run`), and waits out a full disk; it never starts an engine.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable

from mcgs.storage import NoStorage, RunRecord, Storage

__all__ = [
    "RunError", "DB_NAME", "STORAGE_NAME", "BASELINE_NAME", "OVERRIDES_NAME", "LIVE_SETTINGS", "foreign_entries",
    "check_run_folder", "check_new_run", "default_storage_url", "safe_url", "free_space_mb", "wait_for_free_space", "open_storage", "locate_run",
]


class RunError(RuntimeError):
    """A run directory cannot be created, resumed or read; the message says why and what to do."""


DB_NAME = "mcgs.db"
BASELINE_NAME = "baseline.py"  # a starter program to run as the first node (MLAgentBench mode)
OVERRIDES_NAME = "overrides.json"  # settings changed while a run is live (`mcgs set`)
STORAGE_NAME = "storage.json"  # where a run's storage is, when it is not RUN_DIR/mcgs.db


def foreign_entries(run_dir: str | Path) -> list[str]:
    """What keeps an existing folder from being a new run's folder: its entries, sorted, with
    ``/`` after folders.

    A run writes ``nodes/``, ``best/``, ``input/`` and ``profile.json`` into its folder and
    replaces what stands there, so a new run takes only a folder that is empty or holds nothing
    but the ``task/`` that ``mcgs run --prompt`` wrote for it (a real folder, empty or with a
    ``request.json``). A folder that already holds a run is told apart before this (``mcgs.db``
    or ``storage.json``); anything else, even a ``best/`` or ``nodes/`` of the same name, is
    someone's own.

    Returns:
        ``[]`` for a folder that does not exist, is empty, or holds only that ``task/``.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    foreign = []
    for p in run_dir.iterdir():
        # `mcgs run --prompt` writes RUN_DIR/task/ (ending with its request.json) before the run
        if p.name == "task" and p.is_dir() and not p.is_symlink() and ((p / "request.json").is_file() or not any(p.iterdir())):
            continue
        foreign.append(p.name + ("/" if p.is_dir() else ""))
    return sorted(foreign)


def check_run_folder(run_dir: str | Path) -> None:
    """Refuse a folder that holds files a new run would write among (see :func:`foreign_entries`).

    Raises:
        RunError: naming the folder, up to five of its entries, and a folder to use instead.
    """
    foreign = foreign_entries(run_dir)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise RunError(
            f"run folder {run_dir} already holds files that are not an mcgs run's ({shown}); a run writes nodes/, best/ "
            f"and input/ into its folder, so give a new or empty folder, e.g. {Path(run_dir) / 'mcgs-run'}"
        )


def check_new_run(run_dir: Path, data_dir: Path, baseline: str | Path | None = None) -> None:
    """Check a folder for a new run and its starter program before anything is written.

    Args:
        run_dir: The new run's folder (it may exist and hold files of the user's own that
            :func:`check_run_folder` allows).
        data_dir: The task's folder; the run may not lie inside it.
        baseline: The starter program given with ``--baseline``, or None.

    Raises:
        RunError: the folder already holds a run, is a file, holds files that are not a run's,
            or lies in the task folder; the baseline is missing or is an ensemble node's
            program (which blends other nodes' saved predictions and cannot run on its own).
    """
    if (run_dir / DB_NAME).exists() or (run_dir / STORAGE_NAME).exists():
        raise RunError(f"{run_dir} already holds a run; resume it (`mcgs resume {run_dir}`, mcgs.load_search) or choose another run folder")
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(f"run folder {run_dir} is a file; give the path of a new folder")
    check_run_folder(run_dir)
    data = Path(data_dir).resolve()
    if run_dir.resolve().is_relative_to(data):  # (a task the run owns may lie inside it: mcgs run --prompt)
        raise RunError(f"run folder {run_dir} is or lies inside the task folder {data}; choose a folder outside it, e.g. {data.parent / 'runs' / data.name}")
    if baseline is not None and not Path(baseline).is_file():
        raise RunError(f"baseline program {baseline} does not exist; give the path of a Python file that follows docs/solution_contract.md")
    if baseline is not None and "members/" in Path(baseline).read_text(errors="replace") and (Path(baseline).parent / "members").is_dir():
        raise RunError(
            f"{baseline} is an ensemble node's program: it blends other nodes' saved predictions (members/) and cannot run "
            f"on its own; give a single node's program, e.g. RUN_DIR/nodes/<node>/solution.py"
        )


def default_storage_url(run_dir: Path) -> str:
    """``sqlite:///RUN_DIR/mcgs.db`` (absolute), the storage of a run unless told otherwise."""
    return f"sqlite:///{(Path(run_dir) / DB_NAME).resolve()}"


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages and for ``storage.json``."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


LIVE_SETTINGS = ("min_free_disk_mb",)  # the settings `mcgs set` may change
DISK_POLL_S = 2.0
# A run paused because a write found the disk full goes on once this many MiB (or the floor
# min_free_disk_mb, if lower) are free; the floor check before the next candidate then applies.
FULL_DISK_RESUME_MB = 64.0
FULL_DISK_MIN_MB = 16.0  # ... and never on less than this, whatever the floor


def free_space_mb(folder: str | Path) -> float:
    """Free space on the disk holding ``folder`` (or its nearest existing parent), MiB."""
    folder = Path(folder).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free / 2**20


def wait_for_free_space(folder: str | Path, say: Callable[[str], None], poll_s: float = DISK_POLL_S) -> None:
    """Block while the disk holding ``folder`` is full (less than ``FULL_DISK_MIN_MB`` free),
    saying so once: what ``mcgs resume`` does before it opens a run on a full disk (SQLite
    cannot even open its write-ahead log there). Ctrl-C ends the wait (KeyboardInterrupt)."""
    free = free_space_mb(folder)
    if free >= FULL_DISK_MIN_MB:
        return
    say(f"paused: the disk holding {folder} is full ({free:.0f} MB free), so the run cannot be opened for writing; free some "
        f"space and it goes on by itself once {FULL_DISK_MIN_MB:.0f} MB are free (Ctrl-C to stop)")
    while free_space_mb(folder) < FULL_DISK_MIN_MB:
        time.sleep(poll_s)
    say(f"{free_space_mb(folder):.0f} MB free on the disk holding {folder}: going on")


def open_storage(url: str, read_only: bool = False) -> Storage:
    from mcgs.storage import StorageError

    try:
        return Storage(url, read_only=read_only)
    except StorageError:
        raise
    except Exception as exc:  # a bad URL, a missing driver, an unreachable server
        if url.startswith("sqlite") and not read_only:
            from mcgs.storage import _sqlite_path

            where = _sqlite_path(url)
            if free_space_mb(Path(where).parent) < FULL_DISK_MIN_MB:
                raise RunError(f"the disk holding {where} is full ({free_space_mb(Path(where).parent):.0f} MB free), so its storage "
                               f"cannot be opened for writing; free some space and run the command again") from exc
        hint = (" (a damaged or foreign file: restore it from a copy, or start a new run with another --out)"
                if url.startswith("sqlite") and "DatabaseError" in f"{type(exc).__name__} {exc}" else "")
        if type(exc).__name__ in ("ArgumentError", "NoSuchModuleError"):  # not a URL SQLAlchemy knows
            hint = "; give a SQLAlchemy URL such as sqlite:///RUN_DIR/mcgs.db or postgresql+psycopg://USER@HOST/DB"
        raise RunError(f"cannot open the storage {safe_url(url)}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{hint}") from exc


def locate_run(run_dir: str | Path, storage: str | None = None, name: str | None = None, read_only: bool = False) -> tuple[Storage, RunRecord]:
    """Open the storage of the run in ``run_dir`` and read its record.

    Args:
        run_dir: The run directory.
        storage: Storage URL; default ``RUN_DIR/storage.json`` when the run was created with
            another storage, else ``sqlite:///RUN_DIR/mcgs.db``.
        name: The run's name in that storage; default the only run there.
        read_only: Open the storage without writing (:class:`mcgs.storage.Storage`).

    Returns:
        The open storage (the caller closes it) and the run's record.

    Raises:
        RunError: no run there (a task folder given instead, an emptied or foreign database, a
            storage holding several runs and no ``name``), or a storage that needs a password.
    """
    run_dir = Path(run_dir)
    pointer = run_dir / STORAGE_NAME
    if storage is None and pointer.is_file():
        info = json.loads(pointer.read_text())
        if "***" in info.get("url", ""):
            raise RunError(f"the storage of {run_dir} needs a password: pass the full URL with --storage (it was {info['url']})")
        storage, name = info["url"], name or info.get("run")
    if storage is None:
        db = run_dir / DB_NAME
        if not db.is_file():
            hint = (" it looks like a task folder: pass the RUN_DIR you gave `mcgs run ... --out RUN_DIR`"
                    if any((run_dir / f).is_file() for f in ("task.yaml", "train.csv", "config.yaml"))
                    else " pass the folder given to `mcgs run TASK --out RUN_DIR`, or start a run with that command")
            raise RunError(f"{run_dir} holds no mcgs run ({DB_NAME} missing);{hint}")
        if db.stat().st_size == 0:  # opening it would write an empty schema into it
            raise RunError(f"{db} is empty (0 bytes): the run's storage was truncated or lost; restore it from a copy, "
                           f"or start a new run with another --out")
        storage = default_storage_url(run_dir)
    starting = ("a run that is starting writes its storage and record within seconds, so try again; if none is "
                "starting it is a damaged or foreign file: restore it from a copy, or start a new run with another --out")
    try:
        store = open_storage(storage, read_only=read_only)
    except NoStorage as exc:
        if not storage.startswith("sqlite"):
            raise
        raise RunError(f"{safe_url(storage)} has no run; it holds no mcgs schema yet: {starting}") from exc
    runs = store.list_runs()
    if not runs:
        store.close()
        raise RunError(f"{safe_url(storage)} has no run" + (f"; it holds no run's records yet: {starting}" if storage.startswith("sqlite") else ""))
    if name is None:
        if len(runs) > 1:
            store.close()
            raise RunError(f"{safe_url(storage)} holds {len(runs)} runs ({', '.join(r.name for r in runs)}); say which with --run NAME")
        return store, runs[0]
    matches = [r for r in runs if r.name == name]
    if not matches:
        store.close()
        raise RunError(f"{safe_url(storage)} has no run named {name!r} (runs: {', '.join(r.name for r in runs)})")
    return store, matches[0]
