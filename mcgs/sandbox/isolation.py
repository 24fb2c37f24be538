"""Isolation of a candidate: bubblewrap namespaces (no network, a private file system, its own
pid 1, as ``nobody`` when the engine is root) or, without bubblewrap, a process session; and the
resource limits set in the child before it runs (``preexec_fn``)."""

from __future__ import annotations

import functools
import logging
import os
import resource
import sys
from pathlib import Path

from mcgs.gpus import device_nodes
from mcgs.sandbox.classification import Outcome
from mcgs.sandbox.limits import ISOLATION_NAMESPACES, ISOLATION_SESSION, MAX_FILE_MB, SandboxLimits

__all__ = ["namespace_isolation_available", "resolve_isolation", "namespace_argv", "make_preexec", "SANDBOX_UID", "SANDBOX_GID"]

logger = logging.getLogger("mcgs.sandbox")

#: User and group a program runs as in the namespace sandbox when the engine is root (nobody).
SANDBOX_UID = SANDBOX_GID = 65534



def make_preexec(limits: SandboxLimits, as_other_user: bool = False):
    """Return the ``preexec_fn`` that sets the child's resource limits.

    It runs between ``fork`` and ``exec``, so it only calls ``resource.setrlimit`` (imported at
    module level) and allocates nothing of note. ``RLIMIT_NPROC`` is set only when the program
    runs as a user of its own (it counts every process of the user). ``RLIMIT_FSIZE`` is the
    smaller of :data:`MAX_FILE_MB` and the disk cap.
    """
    limit_bytes = None if limits.memory_mb is None else int(limits.memory_mb) * 1024 * 1024
    cpu_s = int(2 * limits.timeout_s * max(1, limits.cpu_threads)) + 10
    fsize = MAX_FILE_MB * 1024 * 1024
    if limits.disk_mb is not None:
        fsize = min(fsize, int(limits.disk_mb * 1024 * 1024))
    nproc = limits.max_processes

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
        if as_other_user:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return preexec


# --------------------------------------------------------------------------------------------
# Namespace sandbox (bubblewrap)


def _system_dirs() -> list[tuple[str, str | None]]:
    """``(path, symlink target or None)`` of the system directories a program needs."""
    out = []
    for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"):
        if os.path.islink(p):
            out.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            out.append((p, None))
    return out


def _python_dirs(python: str) -> list[str]:
    """Directories holding the interpreter and its libraries (read-only in the sandbox)."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(os.path.realpath(python)))}
    dirs = {os.path.realpath(d) for d in dirs} | dirs
    covered = ("/usr", "/bin", "/lib", "/lib64", "/etc")
    keep = sorted(d for d in dirs if os.path.isdir(d) and not any(d == c or d.startswith(c + "/") for c in covered))
    return [d for d in keep if not any(d != o and d.startswith(o + "/") for o in keep)]


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return [str(Path("/", *parts[: i + 1])) for i in range(len(parts))]


def namespace_argv(argv: list[str], workspace: Path, limits: SandboxLimits | None = None) -> tuple[list[str], bool]:
    """``bwrap`` (and, as root, ``setpriv`` to nobody) around ``argv`` for ``workspace``; the
    private ``/tmp`` and ``/dev/shm`` hold at most ``limits.memory_mb`` each; the device nodes of
    ``limits.gpus`` (:func:`mcgs.gpus.device_nodes`) are the only GPUs bound in.

    Returns:
        ``(argv, runs_as_other_user)``. When the engine is root, the workspace is handed to the
        sandbox user (``chown``) so the program can write it.
    """
    root = os.geteuid() == 0
    cmd = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
           "--die-with-parent", "--new-session"]
    if not root:
        cmd.append("--unshare-user-try")
    for path, link in _system_dirs():
        cmd += ["--symlink", link, path] if link else ["--ro-bind", path, path]
    size = [] if limits is None or limits.memory_mb is None else ["--size", str(int(limits.memory_mb) * 1024 * 1024)]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", *size, "--tmpfs", "/dev/shm", "--perms", "1777", *size, "--tmpfs", "/tmp"]
    for node in device_nodes(limits.gpus if limits is not None else ()):  # the GPUs handed to it, nothing else
        cmd += ["--dev-bind", node, node]
    made: set[str] = {"/", "/tmp", "/usr", "/etc", "/proc", "/dev"}

    def bind(kind: str, path: str) -> None:
        for a in _ancestors(path):
            if a not in made:
                cmd.extend(["--perms", "0755", "--dir", a])
                made.add(a)
        cmd.extend([kind, path, path])
        made.add(path)

    for d in _python_dirs(argv[0]):
        bind("--ro-bind", d)
    link = workspace / "input"
    if link.is_symlink():
        bind("--ro-bind", str(link.resolve()))
    bind("--bind", str(workspace))
    cmd += ["--chdir", str(workspace), "--"]
    if root:
        for dirpath, dirnames, filenames in os.walk(workspace):
            for name in (*dirnames, *filenames):
                os.lchown(os.path.join(dirpath, name), SANDBOX_UID, SANDBOX_GID)
        os.chown(workspace, SANDBOX_UID, SANDBOX_GID)
        cmd += ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return cmd + argv, root


@functools.lru_cache(maxsize=1)
def namespace_isolation_available() -> bool:
    """True when ``bwrap`` (and, for root, ``setpriv``) is installed and a trial run inside the
    namespace sandbox succeeds on this machine (containers may forbid namespaces)."""
    import shutil
    import tempfile

    from mcgs.sandbox import run_program  # the package's entry point, built on this module

    if shutil.which("bwrap") is None or (os.geteuid() == 0 and shutil.which("setpriv") is None):
        return False
    with tempfile.TemporaryDirectory(prefix="mcgs-sbx-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "solution.py").write_text("import os\nopen('ok', 'w').write(str(os.getpid()))\n")
        try:
            res = run_program(ws, "solution.py", SandboxLimits(timeout_s=30, memory_mb=None, isolation=ISOLATION_NAMESPACES))
        except (ValueError, OSError) as exc:
            logger.info("namespace sandbox unavailable: %s", exc)
            return False
        ok = res.outcome is Outcome.OK and (ws / "ok").is_file()
        if not ok:
            logger.info("namespace sandbox unavailable: %s %s", res.outcome.value, res.stderr_tail[-300:])
        return ok


def resolve_isolation(requested: str = "auto") -> str:
    """The isolation level to use: ``auto`` is namespaces when available, else process-session.

    Raises:
        ValueError: namespaces were requested (or ``auto`` under ``CI=true``) but bubblewrap is
            missing or does not work here, naming the fix.
    """
    if requested == ISOLATION_SESSION:
        return ISOLATION_SESSION
    if requested not in ("auto", ISOLATION_NAMESPACES):
        raise ValueError(f"unknown isolation {requested!r}; use auto, {ISOLATION_NAMESPACES} or {ISOLATION_SESSION}")
    if namespace_isolation_available():
        return ISOLATION_NAMESPACES
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    if requested == ISOLATION_NAMESPACES or ci:
        raise ValueError(
            "the namespace sandbox is required" + (" under CI=true" if ci and requested == "auto" else "")
            + " but bubblewrap is missing or cannot create namespaces here: install it (Debian: apt-get install bubblewrap util-linux)"
        )
    logger.warning("bubblewrap is not available: candidates run without namespaces (isolation %s)", ISOLATION_SESSION)
    return ISOLATION_SESSION
