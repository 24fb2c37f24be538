"""What goes wrong in a storage, and the guard every write method carries (:func:`writes`)."""

from __future__ import annotations

__all__ = ["StorageError", "NoStorage", "StorageFull", "ClaimLost", "is_disk_full", "writes"]


class StorageError(RuntimeError):
    """The database is unusable (wrong schema version, missing run ...)."""


class NoStorage(StorageError):
    """The database holds no mcgs schema: a foreign or damaged file, or a run's SQLite file in
    the moment between its creation and its schema (a run that is starting)."""


class StorageFull(StorageError):
    """A write failed because the disk holding the storage is full (SQLite's ``database or disk
    is full``, or ``ENOSPC``).

    Attributes:
        path: The file or server whose disk is full (the SQLite file; the URL otherwise).
    """

    def __init__(self, path: str, detail: str):
        self.path = path
        super().__init__(f"the disk holding {path} is full ({detail}); free some space and run the command again")


def is_disk_full(exc: BaseException) -> bool:
    import errno

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        text = str(exc).lower()
        if "database or disk is full" in text or "no space left on device" in text or "could not extend file" in text:
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
    return False


def writes(method):
    """A storage write: refused on a read-only storage; when the disk is full, handed to
    ``on_full`` (the engine pauses until space is freed, then the write is tried again: each
    write is one transaction, rolled back when it fails) or raised as :class:`StorageFull`."""
    import functools

    @functools.wraps(method)
    def write(self, *args, **kwargs):
        if self.read_only:
            raise StorageError(f"{self.where} was opened read-only; {method.__name__} writes")
        while True:
            try:
                return method(self, *args, **kwargs)
            except (StorageError, ValueError):
                raise
            except Exception as exc:
                if not is_disk_full(exc):
                    raise
                full = StorageFull(self.where, str(getattr(exc, "orig", exc)).splitlines()[0])
                if self.on_full is None:
                    raise full from exc
                self.on_full(full)  # returns once there is space again, or raises to give up

    return write


class ClaimLost(StorageError):
    """A worker tried to record a verdict for a node it no longer holds: its lease expired
    and the node was queued again (or another worker claimed it). The verdict is dropped."""
