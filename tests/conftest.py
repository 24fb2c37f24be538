"""Shared fixtures.

Tests that need the real competition data in ``../shared/data`` are marked ``realdata``: they
skip when the folder is absent and ``CI`` is unset, and fail when ``CI=true`` and it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Searches in tests draft as the coder proposes unless a test turns multi-plan screening on
# (tests/test_screening.py); screening every tiny test search would only add minutes.
os.environ.setdefault("MCGS_PLAN_CANDIDATES", "0")
# Searches in tests neither learn from nor add to an experience store (mcgs.experience) unless a
# test names one: they stay reproducible and leave the user's own store alone.
os.environ["MCGS_EXPERIENCE_STORE"] = "none"
# `make test` runs two pytest-xdist workers on two cores: there, each worker's candidates get one
# thread. Two LightGBM/OpenMP programs with two threads each on two cores spin against each
# other (measured: a 6-node test search took 36 s alone, 130 s beside a copy of itself with two
# threads each, 39 s with one).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("MCGS_CPU_THREADS", "1")
# No test talks to the real API: the key is kept only for the explicitly requested live test
# (tests/test_llm_live.py, `pytest -m live`), which reads it from MCGS_LIVE_ANTHROPIC_API_KEY.
_live_key = os.environ.pop("ANTHROPIC_API_KEY", None)
if _live_key:
    os.environ.setdefault("MCGS_LIVE_ANTHROPIC_API_KEY", _live_key)
SHARED_DATA = Path(os.environ.get("MCGS_SHARED_DATA", REPO.parent / "shared" / "data"))


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips (or fails under ``CI=true``) when absent."""
    if not SHARED_DATA.is_dir():
        if _in_ci():
            pytest.fail(f"CI=true but the shared data folder {SHARED_DATA} is absent")
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    if SHARED_DATA.is_dir() or _in_ci():
        return
    skip = pytest.mark.skip(reason=f"realdata: {SHARED_DATA} is absent")
    for item in items:
        if "realdata" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say that the live API test was left out: under pytest-xdist the summary line has no
    "deselected" count (the workers deselect it), so the README's "deselected unless you ask
    for it" would otherwise show nowhere."""
    if "not live" in (config.getoption("markexpr", "") or ""):
        terminalreporter.write_line("the live Anthropic API test (tests/test_llm_live.py) was deselected; "
                                    "run it with: .venv/bin/python -m pytest -m live (needs ANTHROPIC_API_KEY)")


@pytest.fixture(scope="session")
def postgres_server():
    """A local PostgreSQL server (tests/postgres.py); skips when Debian's ``postgresql`` or the
    ``psycopg`` driver is missing, and fails instead under ``CI=true`` (``.ci/run`` installs both)."""
    from postgres import PostgresServer, postgres_bin

    bindir = postgres_bin()
    try:
        import psycopg  # noqa: F401
    except ImportError:
        bindir = None
    if bindir is None:
        if _in_ci():
            pytest.fail("CI=true but PostgreSQL (Debian package postgresql) or the psycopg driver is missing")
        pytest.skip("PostgreSQL (Debian package postgresql) or psycopg is not installed")
    server = PostgresServer(bindir)
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def storage_url(request, tmp_path):
    """A fresh, empty storage: a SQLite file, then a PostgreSQL database (the storage contract
    holds for both; DESIGN §7)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'mcgs.db'}"
    return request.getfixturevalue("postgres_server").new_database()
