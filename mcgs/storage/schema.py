"""Opening a storage's database and keeping its schema current: the SQLAlchemy engine with
SQLite's pragmas (WAL journal, busy timeout, immediate write transactions) or a read-only SQLite
connection, the Alembic migrations, and the schema-version checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event

from mcgs.storage.errors import NoStorage, StorageError
from mcgs.storage.models import SCHEMA_VERSION, SchemaInfo

__all__ = ["MIGRATIONS_DIR", "upgrade", "open_engine", "check_schema", "check_schema_read_only", "upgraded_copy", "schema_version"]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
#: Alembic revision of each storage schema version written before the migrations existed.
_REVISION_OF_VERSION = {2: "0001", 3: "0002", 4: "0003"}


def upgrade(engine) -> None:
    """Bring a database to the current schema with the Alembic migrations in
    ``mcgs/storage/migrations`` (a new database is built by them from the first revision).

    A database written before migrations existed (no ``alembic_version`` table) is stamped with
    the revision of its ``schema_info`` version first. Runs in one transaction, so concurrent
    openers (workers) wait for each other.

    Raises:
        StorageError: the database is from a newer mcgs (an unknown revision or version).
    """
    import logging

    from alembic import command
    from alembic.config import Config
    from alembic.util.exc import CommandError
    from sqlalchemy import inspect, text

    logging.getLogger("alembic").setLevel(logging.WARNING)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        tables = set(inspect(conn).get_table_names())
        try:
            if "alembic_version" not in tables and "runs" in tables:
                row = conn.execute(text("SELECT value FROM schema_info WHERE key = 'schema_version'")).first()
                version = int(row[0]) if row else 2
                if version not in _REVISION_OF_VERSION:
                    raise StorageError(f"{engine.url} has schema version {version}, this mcgs uses {SCHEMA_VERSION}; use the mcgs version that wrote it")
                command.stamp(cfg, _REVISION_OF_VERSION[version])
            command.upgrade(cfg, "head")
        except CommandError as exc:
            raise StorageError(f"{engine.url} was written by a newer mcgs ({exc}); use that version") from exc


def _sqlite_pragmas(dbapi_conn, _record):
    dbapi_conn.isolation_level = None  # let SQLAlchemy's "begin" event issue BEGIN IMMEDIATE
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _begin_immediate(conn):
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _sqlite_read_pragmas(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_path(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).database or url


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def _read_only_url(path: str) -> str:
    """A SQLite URI that reads ``path`` without writing anything beside it.

    A database with no write-ahead log beside it (``-wal``: the last writer closed it, so
    everything is in the file) is opened ``immutable=1``: a ``mode=ro`` connection to a WAL
    database would create the ``-wal`` and ``-shm`` files and leave them behind. One with a log
    (an engine is writing it, or one was killed) is opened ``mode=ro``, which takes the shared
    locks and reads the log; where that fails (no ``-shm`` and a folder that cannot be written),
    ``immutable=1`` again, and the changes left in the log are not read."""
    import os
    import sqlite3
    from urllib.parse import quote

    uri = f"file:{quote(os.path.abspath(path))}"
    if os.path.isfile(path) and not os.path.exists(f"{path}-wal"):
        return f"sqlite:///{uri}?immutable=1&uri=true"
    try:
        con = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=5)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
        return f"sqlite:///{uri}?mode=ro&uri=true"
    except sqlite3.Error:
        return f"sqlite:///{uri}?immutable=1&uri=true"


def open_engine(url: str, read_only: bool = False):
    """The SQLAlchemy engine of a storage URL: SQLite with its pragmas and immediate write
    transactions, or, read-only, a SQLite connection that cannot write; any other database as
    SQLAlchemy opens it (with pre-ping).

    Returns:
        ``(engine, where)``: ``where`` names the database in messages (the SQLite file, or the
        URL without its password).
    """
    is_sqlite = url.startswith("sqlite")
    where = _sqlite_path(url) if is_sqlite else _hide_password(url)
    kwargs: dict[str, Any] = {"connect_args": {"timeout": 30}} if is_sqlite else {"pool_pre_ping": True}
    if is_sqlite and read_only:
        engine = create_engine(_read_only_url(where), **kwargs)
        event.listen(engine, "connect", _sqlite_read_pragmas)
    else:
        engine = create_engine(url, **kwargs)
        if is_sqlite:
            event.listen(engine, "connect", _sqlite_pragmas)
            event.listen(engine, "begin", _begin_immediate)
    return engine, where


def check_schema(session, url: str) -> None:
    """Stamp a new database with :data:`SCHEMA_VERSION`, or check an existing one has it.

    Raises:
        StorageError: the database has another schema version.
    """
    with session.begin() as s:
        row = s.get(SchemaInfo, "schema_version")
        if row is None:
            s.add(SchemaInfo(key="schema_version", value=str(SCHEMA_VERSION)))
        elif int(row.value) != SCHEMA_VERSION:
            raise StorageError(
                f"{url} has schema version {row.value}, this mcgs uses {SCHEMA_VERSION}; "
                f"use the mcgs version that wrote it"
            )


def check_schema_read_only(engine, session, where: str, *, allow_older: bool = False) -> int:
    """Check, without writing, that a database is an mcgs storage of :data:`SCHEMA_VERSION`
    (or, with ``allow_older``, of an earlier version that :func:`upgraded_copy` can read).

    Returns:
        The stored schema version.

    Raises:
        NoStorage: no mcgs storage there.
        StorageError: another schema version (an older one, unless
            allowed, needs a migration, which only a writer runs).
    """
    from sqlalchemy import inspect

    with engine.connect() as conn:
        if "schema_info" not in inspect(conn).get_table_names():
            raise NoStorage(f"{where} holds no mcgs storage")
    with session() as s:
        row = s.get(SchemaInfo, "schema_version")
        version = int(row.value) if row else None
        if version is None or version > SCHEMA_VERSION or (version < SCHEMA_VERSION and not allow_older):
            raise StorageError(
                f"{where} has schema version {row.value if row else '?'}, this mcgs uses {SCHEMA_VERSION}; "
                f"{'resume it once with write access to upgrade it' if version and version < SCHEMA_VERSION else 'use the mcgs version that wrote it'}"
            )
    return version


def upgraded_copy(engine) -> tuple[Any, Path]:
    """A migrated copy of an older SQLite storage, for reading it without writing to it.

    The database is copied with SQLite's online backup (a consistent copy, even of a run that
    is being written) into a new temporary folder, and the copy is brought to the current
    schema (:func:`upgrade`). The original is not touched, so an archived run, a read-only
    mount or a run that a running engine of the older version writes can be read.

    Args:
        engine: A (read-only) engine of the older SQLite database.

    Returns:
        ``(folder, path)``: the :class:`tempfile.TemporaryDirectory` holding the copy (remove
        it with ``cleanup()`` when done) and the copy's path.
    """
    import sqlite3
    import tempfile

    folder = tempfile.TemporaryDirectory(prefix="mcgs-upgraded-")
    path = Path(folder.name) / "mcgs.db"
    source = engine.raw_connection()
    try:
        target = sqlite3.connect(path)
        try:
            source.driver_connection.backup(target)
        finally:
            target.close()
    finally:
        source.close()
    copy, _ = open_engine(f"sqlite:///{path}")
    try:
        upgrade(copy)
    finally:
        copy.dispose()
    return folder, path


def schema_version(session) -> int:
    """The schema version stored in the database."""
    with session() as s:
        return int(s.get(SchemaInfo, "schema_version").value)
