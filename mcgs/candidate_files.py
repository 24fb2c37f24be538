"""Reading what a candidate left in its workspace, without trusting it.

A candidate program is untrusted, and the engine reads its files outside the sandbox (as root,
when it runs as root). A file the candidate wrote can be a symbolic link to anything the engine
may read (a task's held-out answers, ``/etc/shadow``), a hard link to a file outside, a FIFO that
blocks the reader, a device, or simply too large to read. So every file the engine reads from,
copies out of, or walks in a workspace goes through this module:

* the path is relative, with no ``..``, and every component is opened with ``O_NOFOLLOW``
  relative to the already opened parent (``openat``), so no link is ever followed, not even a
  folder link swapped in between a check and the open;
* what is opened must be a regular file (``fstat``), with a single hard link, whose resolved
  path (``/proc/self/fd``) lies inside the workspace;
* it is read with a size cap (the ``max_output_mb`` setting).

Anything else raises :class:`CandidateFileError`, whose message names the file (relative to the
workspace) and the reason, never its content; the engine turns it into an ``invalid_output``
verdict. The workspace folder itself was made by the engine; a workspace that is a link is
refused too (a candidate running as the engine's user could swap it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Iterator

__all__ = [
    "CandidateFileError",
    "DEFAULT_MAX_OUTPUT_MB",
    "open_candidate_file",
    "read_candidate_file",
    "copy_candidate_file",
    "copy_candidate_tree",
    "candidate_file_exists",
    "disk_usage_bytes",
    "remove_tree",
]

#: Default cap on one file the engine reads or copies out of a workspace, MiB (setting
#: ``max_output_mb``): an out-of-fold table of a million rows and a hundred classes is about 2 GiB.
DEFAULT_MAX_OUTPUT_MB = 4096

_KIND_NAMES = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symbolic link",
}
_WHY = "the engine reads only regular files inside the workspace"


class CandidateFileError(ValueError):
    """A file a candidate left cannot be read safely (or is missing).

    Attributes:
        rel: The file's path relative to the workspace.
        kind: ``missing``, ``link``, ``not_regular``, ``hardlink``, ``outside``, ``too_large``
            or ``bad_path``.
    """

    def __init__(self, rel: str, kind: str, message: str):
        super().__init__(message)
        self.rel, self.kind = rel, kind


def _parts(rel: str | PurePosixPath) -> tuple[str, ...]:
    p = PurePosixPath(str(rel))
    if p.is_absolute() or not p.parts or any(part in ("..", ".", "") for part in p.parts):
        raise CandidateFileError(str(rel), "bad_path", f"{rel}: not a path inside the workspace")
    return p.parts


def _kind(mode: int) -> str:
    return _KIND_NAMES.get(stat.S_IFMT(mode), "not a regular file")


@contextlib.contextmanager
def _opened(workspace: Path, rel: str, max_bytes: int) -> Iterator[tuple[int, int]]:
    """``(fd, size)`` of a regular file ``rel`` of ``workspace``, opened without following any
    link; closed on exit. Raises :class:`CandidateFileError`."""
    parts = _parts(rel)
    rel = "/".join(parts)
    try:
        fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CandidateFileError(rel, "missing", f"{rel} was not written (its workspace {workspace} is gone)") from None
    except OSError as exc:
        raise CandidateFileError(rel, "link", f"{rel}: its workspace {workspace} is not a real folder ({exc.strerror})") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            shown = "/".join(parts[: i + 1])
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise CandidateFileError(rel, "missing", f"{rel} was not written") from None
            except NotADirectoryError:
                raise CandidateFileError(rel, "not_regular", f"{rel}: {'/'.join(parts[:i])} is not a directory; {_WHY}") from None
            if stat.S_ISLNK(st.st_mode):
                raise CandidateFileError(rel, "link", f"{rel}: {shown} is a symbolic link; {_WHY}, never through links")
            want_dir = not last
            if want_dir and not stat.S_ISDIR(st.st_mode):
                raise CandidateFileError(rel, "not_regular", f"{rel}: {shown} is {_kind(st.st_mode)}, not a directory; {_WHY}")
            if last and not stat.S_ISREG(st.st_mode):
                raise CandidateFileError(rel, "not_regular", f"{rel} is {_kind(st.st_mode)}; {_WHY}")
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_DIRECTORY if want_dir else os.O_NONBLOCK)
            try:
                nfd = os.open(part, flags, dir_fd=fd)
            except OSError as exc:  # swapped for a link (ELOOP) or something else since the stat
                kind = "link" if exc.errno in (errno.ELOOP, errno.EMLINK) else "not_regular"
                raise CandidateFileError(rel, kind, f"{rel}: {shown} changed while it was opened ({exc.strerror}); {_WHY}") from None
            os.close(fd)
            fd = nfd
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CandidateFileError(rel, "not_regular", f"{rel} is {_kind(st.st_mode)}; {_WHY}")
        if st.st_nlink > 1:
            raise CandidateFileError(rel, "hardlink", f"{rel} has {st.st_nlink} hard links (it may be a file from outside the "
                                                      f"workspace); {_WHY}, each written by the candidate itself")
        with contextlib.suppress(OSError):  # where /proc is mounted: the file really is inside
            where = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if not where.is_relative_to(Path(workspace).resolve()):
                raise CandidateFileError(rel, "outside", f"{rel} resolves outside the workspace; {_WHY}")
        if st.st_size > max_bytes:
            raise CandidateFileError(rel, "too_large", f"{rel} is {st.st_size / 2**20:.1f} MiB, over the cap of "
                                                       f"{_mib(max_bytes)} on a file the engine reads (setting max_output_mb)")
        yield fd, st.st_size
    finally:
        os.close(fd)


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def open_candidate_file(workspace: str | Path, rel: str, *, max_bytes: int):
    """A context manager yielding ``(fd, size_bytes)`` of the regular file ``workspace/rel``.

    Args:
        workspace: The node's workspace (made by the engine).
        rel: The file's path relative to it (``working/oof.csv``).
        max_bytes: The size cap, bytes.

    Raises:
        CandidateFileError: missing, a link (the file or any folder on its path), not a regular
            file, more than one hard link, outside the workspace, or over ``max_bytes``.
    """
    return _opened(Path(workspace), rel, max_bytes)


def read_candidate_file(workspace: str | Path, rel: str, *, max_bytes: int) -> bytes:
    """The bytes of ``workspace/rel`` (see :func:`open_candidate_file`), at most ``max_bytes``.

    Raises:
        CandidateFileError: as :func:`open_candidate_file`; also when the file grew past the cap
            while it was read.
    """
    with _opened(Path(workspace), rel, max_bytes) as (fd, _size):
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 24, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise CandidateFileError(rel, "too_large", f"{rel} grew past the cap of {_mib(max_bytes)} while it was read "
                                                           f"(setting max_output_mb)")
        return b"".join(chunks)


def copy_candidate_file(workspace: str | Path, rel: str, dest: str | Path, *, max_bytes: int) -> None:
    """Copy ``workspace/rel`` to ``dest`` (a path the engine owns) atomically: a temporary file in
    ``dest``'s folder, fsync, mode 644, rename. Streams, so a large model file is not held in
    memory. Nothing is left at ``dest`` when it fails.

    Raises:
        CandidateFileError: as :func:`read_candidate_file`.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _opened(Path(workspace), rel, max_bytes) as (fd, _size):
        tmp_fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
        try:
            total = 0
            with os.fdopen(tmp_fd, "wb") as out:
                while chunk := os.read(fd, 1 << 24):
                    total += len(chunk)
                    if total > max_bytes:
                        raise CandidateFileError(rel, "too_large", f"{rel} grew past the cap of {_mib(max_bytes)} while it was "
                                                                   f"copied (setting max_output_mb)")
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def copy_candidate_tree(workspace: str | Path, rel: str, dest: str | Path, *, max_bytes: int, max_files: int = 10_000) -> int:
    """Copy the folder ``workspace/rel`` (a fitted model a program saved as several files) to
    ``dest``: every regular file in it, each through :func:`copy_candidate_file`; the folder and
    its subfolders are never reached through a link.

    Args:
        max_bytes: Cap on all the files together, bytes.
        max_files: Cap on their number.

    Returns:
        The bytes copied.

    Raises:
        CandidateFileError: the folder is missing or a link, holds a link, a FIFO or another
            file that is not regular, more than ``max_files`` files, or more than ``max_bytes``.
    """
    workspace, dest = Path(workspace), Path(dest)
    parts = _parts(rel)
    for i in range(len(parts)):
        shown = "/".join(parts[: i + 1])
        try:
            st = os.lstat(workspace.joinpath(*parts[: i + 1]))
        except FileNotFoundError:
            raise CandidateFileError(shown, "missing", f"{shown} was not written") from None
        if not stat.S_ISDIR(st.st_mode):
            raise CandidateFileError(shown, "link" if stat.S_ISLNK(st.st_mode) else "not_regular",
                                     f"{shown} is {_kind(st.st_mode)}, not a folder; {_WHY}")
    files: list[str] = []
    pending = [PurePosixPath(*parts)]
    while pending:
        folder = pending.pop()
        with os.scandir(workspace / folder) as entries:
            for entry in entries:
                sub = folder / entry.name
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    pending.append(sub)
                elif stat.S_ISREG(mode):
                    files.append(str(sub))
                else:
                    raise CandidateFileError(str(sub), "link" if stat.S_ISLNK(mode) else "not_regular",
                                             f"{sub} is {_kind(mode)}; {_WHY}")
                if len(files) > max_files:
                    raise CandidateFileError(rel, "too_large", f"{rel} holds more than {max_files} files")
    total = 0
    for f in sorted(files):
        left = max_bytes - total
        copy_candidate_file(workspace, f, dest / PurePosixPath(f).relative_to(*parts), max_bytes=left)
        total += (dest / PurePosixPath(f).relative_to(*parts)).stat().st_size
    return total


def candidate_file_exists(workspace: str | Path, rel: str) -> bool:
    """True when ``workspace/rel`` is a regular file reached without links (its size is not
    checked); False for anything else, a missing file included."""
    try:
        with _opened(Path(workspace), rel, max_bytes=1 << 62):
            return True
    except CandidateFileError:
        return False


def disk_usage_bytes(folder: str | Path) -> int:
    """Bytes allocated on disk under ``folder`` (``st_blocks``), links not followed, each inode
    counted once; entries that vanish while walking are skipped. What the disk cap of a
    candidate is checked against."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(folder)]
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    key = (st.st_dev, st.st_ino)
                    if key in seen:
                        continue
                    seen.add(key)
                    total += st.st_blocks * 512
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
        except OSError:
            continue
    return total


def remove_tree(path: str | Path) -> None:
    """Remove ``path`` and everything under it without following links (:func:`shutil.rmtree`'s
    fd-based walk); folders a candidate made unreadable or unwritable are opened up first (the
    engine's user owns them when it is not root). A link at ``path`` itself is removed, not what
    it points to. Missing is fine.

    Raises:
        OSError: something could not be removed (the message names it).
    """
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
        return
    if not path.exists():
        return
    if os.geteuid() != 0:
        _open_up(path)
    shutil.rmtree(path)


def _open_up(folder: Path) -> None:
    """``u+rwx`` on ``folder`` and every folder under it (links not followed)."""
    stack = [str(folder)]
    while stack:
        d = stack.pop()
        with contextlib.suppress(OSError):
            st = os.stat(d, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) & stat.S_IRWXU != stat.S_IRWXU:
                os.chmod(d, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
            with os.scandir(d) as it:
                stack.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
