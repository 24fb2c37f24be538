"""The environment a candidate starts with: an allow-list of the engine's variables, no
secrets, the thread counts of its limits, and the markers the supervisor finds its processes by."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Mapping

__all__ = ["scrubbed_env", "MARKER_ENV", "OWNER_ENV", "TIME_LIMIT_ENV"]

logger = logging.getLogger("mcgs.sandbox")

#: Environment variable holding a per-run token; used to find escaped descendants at cleanup.
MARKER_ENV = "MCGS_SANDBOX_ID"

#: Seconds a candidate has before it is stopped (its timeout, or the run's remaining budget when
#: that ends first), whole seconds; a program may size its work by it (contract 1.3).
TIME_LIMIT_ENV = "MCGS_TIME_LIMIT_S"

#: The engine process that started a candidate (see :func:`mcgs.sandbox.supervisor.owner_id`).
OWNER_ENV = "MCGS_ENGINE"

#: Variables copied from the parent when set. Nothing else passes.
_ALLOWED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "PYTHONHASHSEED",
    # This machine's OpenBLAS needs these for correct numpy results.
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
#: Names that are never passed, even through ``extra`` (matched case-insensitively).
_SECRET_ENV = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$"
    r"|^(ANTHROPIC|AWS|OPENAI)_"
    r"|^(HTTPS?|NO|ALL|FTP)_PROXY$",
    re.IGNORECASE,
)
#: Thread-count variables set to ``SandboxLimits.cpu_threads``.
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def scrubbed_env(
    extra: Mapping[str, str] | None = None,
    *,
    workspace: Path | None = None,
    cpu_threads: int = 2,
) -> dict[str, str]:
    """Build a candidate's environment from an allow-list of the parent's variables.

    Copies ``PATH``, ``LANG``, ``LC_ALL``, ``LC_CTYPE``, ``TZ``, ``PYTHONHASHSEED``,
    ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` when set; drops everything else (API keys,
    tokens, proxies, ``PYTHONPATH``, ``VIRTUAL_ENV`` ...). Sets the thread-count variables,
    ``PYTHONUNBUFFERED=1``, ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONFAULTHANDLER=1`` and
    ``MPLBACKEND=Agg``. ``extra`` is applied last, except that names that look like secrets or
    proxy settings are dropped from it too (with a warning).

    Args:
        extra: Variables to add or override.
        workspace: When given, ``HOME`` is set to it and ``TMPDIR`` to ``workspace/tmp``
            (created); when ``None``, neither is set.
        cpu_threads: Value for ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``,
            ``MKL_NUM_THREADS`` and ``NUMEXPR_NUM_THREADS``.

    Returns:
        A new dictionary; the parent's ``os.environ`` is not changed.
    """
    env = {name: os.environ[name] for name in _ALLOWED_ENV if name in os.environ}
    if workspace is not None:
        workspace = Path(workspace).resolve()
        tmp = workspace / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env["HOME"] = str(workspace)
        env["TMPDIR"] = str(tmp)
    for name in _THREAD_ENV:
        env[name] = str(cpu_threads)
    env.update(
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONFAULTHANDLER="1",
        MPLBACKEND="Agg",
    )
    for name, value in (extra or {}).items():
        if _SECRET_ENV.search(name):
            logger.warning("not passing %s to a sandboxed program", name)
            continue
        env[name] = str(value)
    return env
