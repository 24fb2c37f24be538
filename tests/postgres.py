"""A throwaway PostgreSQL server for the storage tests (DESIGN §7: many workers share a run
through PostgreSQL).

The server is Debian's ``postgresql`` package (``.ci/run`` installs it): a cluster is made with
``initdb`` in a temporary folder and listens only on a Unix socket there (no TCP port). When the
tests run as root the server runs as the ``postgres`` user, since PostgreSQL refuses root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path


def postgres_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb``, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(found[-1]).parent if found else None


class PostgresServer:
    """Start with :meth:`start`, stop with :meth:`stop`; :meth:`new_database` gives a URL."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="mcgs-pg-", dir="/tmp"))  # short: socket paths are limited to 107 bytes
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        res = subprocess.run([*self.as_user, *argv], capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {res.stdout[-1500:]}{res.stderr[-1500:]}")

    def start(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "mcgs", "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-k {self.root} -c listen_addresses='' -c fsync=off -c max_connections=100"
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.root / "server.log"), "-w", "start")

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://mcgs@/{database}?host={self.root}"

    def new_database(self) -> str:
        """Create an empty database and return its SQLAlchemy URL."""
        import psycopg

        name = "t" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"host={self.root} user=mcgs dbname=postgres", autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url(name)
