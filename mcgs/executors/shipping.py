"""A candidate's run on a machine that does not share the run folder: what goes there, what comes back.

An executor that places candidates on other machines (:mod:`mcgs.executors.ray_cluster`) ships
three things and nothing else:

* the task's **input** folder once per machine: packed once per run (:func:`pack_folder`), put
  in the cluster's object store by the engine, unpacked on first use into a cache keyed by its
  content (:func:`input_key`, :func:`cached_input`) and made read-only there;
* the node's **workspace** as the engine prepared it (``solution.py``, ``working/``,
  ``submission/``, an ensemble's ``members/``), without its ``input`` link;
* back, the **outputs**: every regular file the program left in its workspace, each read as the
  engine reads a workspace at home (:mod:`mcgs.candidate_files`: no link followed, a single
  hard link, inside the workspace, under the size cap), ``tmp/`` and ``input`` left out.

The engine writes the outputs into the node's own workspace (:func:`write_outputs`, regular
files only, under paths it checks) and scores them there as it scores a local run: nothing a
candidate leaves on the other machine is trusted more than what it leaves at home.
:func:`run_shipped` is the other machine's side; it runs the program in the same sandbox
(:func:`mcgs.sandbox.run_program`) as a local run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import threading
from pathlib import Path, PurePosixPath
from typing import Callable, Mapping

from mcgs.candidate_files import CandidateFileError, read_candidate_file, remove_tree
from mcgs.sandbox import ExecutionResult, SandboxLimits, run_program

__all__ = ["ShippedRun", "ShippedResult", "pack_folder", "unpack_folder", "input_key", "cached_input", "run_shipped",
           "collect_outputs", "write_outputs", "CACHE_ENV", "WORKSPACES_ENV"]

#: Environment variable naming the folder that caches unpacked task inputs on a machine
#: (default: ``mcgs-inputs`` in the system's temporary folder).
CACHE_ENV = "MCGS_INPUT_CACHE"
#: Environment variable naming the folder of the workspaces of running candidates on a machine
#: (default: ``mcgs-workspaces`` in the system's temporary folder).
WORKSPACES_ENV = "MCGS_WORKSPACES"
#: Folders of a workspace whose files never come back: the program's temporary files and the
#: task's input (read-only, and the engine has its own copy).
_NOT_RETURNED = ("tmp", "input")


@dataclasses.dataclass(frozen=True)
class ShippedRun:
    """One run of a node's program, as it travels to another machine.

    Attributes:
        workspace: The prepared workspace without ``input``, a tar archive (bytes).
        input_key: :func:`input_key` of the task input the workspace's ``input`` must show.
        limits: The sandbox limits (``gpus`` is replaced by the GPUs the cluster assigned there).
        env: Extra environment variables for the program (``MCGS_SEED``).
        cancel_after_s: Seconds after which the run's budget ends (see :func:`mcgs.sandbox.run_program`).
        max_file_bytes: Cap on one output file, bytes (the ``max_output_mb`` setting).
        max_total_bytes: Cap on all output files together, bytes.
    """

    workspace: bytes
    input_key: str
    limits: SandboxLimits
    env: Mapping[str, str]
    cancel_after_s: float | None
    max_file_bytes: int
    max_total_bytes: int


@dataclasses.dataclass(frozen=True)
class ShippedResult:
    """What comes back: the sandbox's record, the output files and what was left behind.

    Attributes:
        result: The run's :class:`~mcgs.sandbox.ExecutionResult`.
        files: Output files by workspace-relative POSIX path, their bytes.
        refused: ``"path: reason"`` for each file that was not sent back (a link, a FIFO, over a
            cap): the engine's scoring then finds it missing.
        host: The machine that ran it (its host name).
    """

    result: ExecutionResult
    files: dict[str, bytes]
    refused: list[str]
    host: str


def pack_folder(folder: Path, skip: tuple[str, ...] = ()) -> bytes:
    """A folder the engine made, as an uncompressed tar archive (bytes); top-level entries named
    in ``skip`` are left out and links are stored as links, never followed."""
    buf = io.BytesIO()
    folder = Path(folder)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for entry in sorted(folder.iterdir()):
            if entry.name not in skip:
                tar.add(entry, arcname=entry.name, recursive=True)
    return buf.getvalue()


def unpack_folder(data: bytes, dest: Path) -> None:
    """Unpack :func:`pack_folder`'s archive into ``dest`` with tarfile's ``data`` filter (no
    absolute paths, no ``..``, no links that leave ``dest``, no devices)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter="data")


def input_key(folder: Path) -> str:
    """A key of a task input's content as the engine holds it: the SHA-256 of every file's
    relative path, size and modification time (nanoseconds), in path order, 16 hex digits.
    Inputs are written once per run and read-only after, so equal keys mean equal content."""
    folder = Path(folder).resolve()
    h = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            p = Path(root) / name
            st = p.lstat()
            h.update(f"{p.relative_to(folder)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path(tempfile.gettempdir()) / "mcgs-inputs")


_cache_lock = threading.Lock()


def cached_input(key: str, fetch: Callable[[], bytes], root: Path | None = None) -> Path:
    """The task input ``key`` unpacked on this machine, fetched and unpacked on first use only.

    Concurrent candidates on one machine (threads or processes) wait on a file lock, so the
    input is fetched once. The folder and its files are made read-only for everyone (a sandbox
    that runs the program as ``nobody`` can read them, none can write them).

    Args:
        key: :func:`input_key` of the input.
        fetch: Returns the input's :func:`pack_folder` archive (from the object store).
        root: The cache folder (default: :data:`CACHE_ENV` or the system's temporary folder).

    Returns:
        The unpacked input folder.
    """
    root = Path(root or _cache_root())
    root.mkdir(parents=True, exist_ok=True)
    done = root / key / "input"
    if done.is_dir():
        return done
    with _cache_lock, open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_dir():
            tmp = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=root))
            unpack_folder(fetch(), tmp / "input")
            _read_only_tree(tmp / "input")
            (root / key).mkdir(exist_ok=True)
            os.replace(tmp / "input", done)
            shutil.rmtree(tmp, ignore_errors=True)
    return done


def _read_only_tree(folder: Path) -> None:
    """Files 0444 and folders 0555 under ``folder``, itself included."""
    for root, dirs, files in os.walk(folder, topdown=False):
        for name in files:
            if not (Path(root) / name).is_symlink():
                os.chmod(Path(root) / name, 0o444)
        for name in dirs:
            os.chmod(Path(root) / name, 0o555)
    os.chmod(folder, 0o555)


def collect_outputs(workspace: Path, max_file_bytes: int, max_total_bytes: int) -> tuple[dict[str, bytes], list[str]]:
    """Every regular file a program left in ``workspace`` (``tmp/`` and ``input`` left out),
    each read through :func:`mcgs.candidate_files.read_candidate_file`; links are never
    followed or sent.

    Returns:
        ``(files, refused)``: the files by relative path, and ``"path: reason"`` for each left
        out (not a regular file, a hard link, over ``max_file_bytes``, or past
        ``max_total_bytes`` in all).
    """
    files: dict[str, bytes] = {}
    refused: list[str] = []
    total = 0
    pending = [PurePosixPath()]
    while pending:
        folder = pending.pop()
        with os.scandir(workspace / folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                rel = folder / entry.name
                if not folder.parts and entry.name in _NOT_RETURNED:
                    continue
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    pending.append(rel)
                    continue
                try:
                    data = read_candidate_file(workspace, str(rel), max_bytes=min(max_file_bytes, max_total_bytes - total))
                except CandidateFileError as exc:
                    refused.append(f"{rel}: {exc}")
                    continue
                files[str(rel)] = data
                total += len(data)
    return files, refused


def write_outputs(files: Mapping[str, bytes], workspace: Path) -> list[str]:
    """Write a shipped run's output files into the node's ``workspace`` on the engine's machine.

    Only regular files are created, under paths that stay inside the workspace (relative, no
    ``..``, not under ``input``); a path whose folder is not a real folder of the workspace, or
    that would replace something that is not a regular file, is skipped. Files there are
    replaced (``logs/``, a ``working/`` left by the engine).

    Returns:
        ``"path: reason"`` for each file not written.
    """
    skipped = []
    for rel, data in files.items():
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or any(p in ("", ".", "..") for p in parts) or parts[0] in _NOT_RETURNED:
            skipped.append(f"{rel}: not a path the engine writes")
            continue
        folder = workspace
        try:
            for part in parts[:-1]:
                folder = folder / part
                if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                    raise OSError("a parent is not a folder")
                folder.mkdir(exist_ok=True)
            dest = folder / parts[-1]
            if dest.is_symlink() or (dest.exists() and not dest.is_file()):
                raise OSError("something other than a regular file stands there")
            tmp = dest.with_name(f".{dest.name}.mcgs-part")
            with open(tmp, "xb") as fh:
                fh.write(data)
            os.replace(tmp, dest)
        except OSError as exc:
            skipped.append(f"{rel}: {exc}")
    return skipped


def _workspaces_root() -> Path:
    return Path(os.environ.get(WORKSPACES_ENV) or Path(tempfile.gettempdir()) / "mcgs-workspaces")


def _fresh_workspace() -> Path:
    """A new workspace folder named after this process (``PID-random``); those of processes
    that are gone (a worker killed mid-candidate) are removed first."""
    import psutil

    root = _workspaces_root()
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        pid = old.name.split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not psutil.pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                remove_tree(old)
    return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))


def run_shipped(job: ShippedRun, fetch_input: Callable[[], bytes], gpus: tuple[int, ...] = (),
                cancel: threading.Event | None = None) -> ShippedResult:
    """Run a shipped node program on this machine, in the sandbox, and pack what it left.

    The workspace is unpacked into a fresh folder under :data:`WORKSPACES_ENV` whose ``input`` links to the cached
    task input (:func:`cached_input`), run with ``job.limits`` (``gpus`` as the cluster assigned
    them) and removed after its outputs are read.

    Raises:
        RuntimeError: the limits ask for namespace isolation and bubblewrap cannot run here
            (install it on every machine of the cluster).
        KeyboardInterrupt: the run was cancelled (by the cluster); its processes are stopped.
    """
    import socket

    from mcgs.sandbox import ISOLATION_NAMESPACES, namespace_isolation_available

    if job.limits.isolation == ISOLATION_NAMESPACES and not namespace_isolation_available():
        raise RuntimeError(f"{socket.gethostname()}: the run's candidates need the namespace sandbox and bubblewrap cannot run on this "
                           f"machine; install it (apt-get install bubblewrap) on every machine of the cluster")
    inp = cached_input(job.input_key, fetch_input)
    ws = _fresh_workspace()
    try:
        unpack_folder(job.workspace, ws)
        (ws / "input").symlink_to(inp, target_is_directory=True)
        limits = dataclasses.replace(job.limits, gpus=tuple(gpus))
        result = run_program(ws, "solution.py", limits, extra_env=dict(job.env), cancel=cancel, cancel_after_s=job.cancel_after_s)
        files, refused = collect_outputs(ws, job.max_file_bytes, job.max_total_bytes)
    finally:
        with contextlib.suppress(OSError):
            remove_tree(ws)
    return ShippedResult(result=result, files=files, refused=refused, host=socket.gethostname())
