"""Tests for mcgs.sandbox: outcomes, process-tree cleanup, environment scrubbing, limits."""

from __future__ import annotations

import _thread
import os
import shutil
import signal
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from mcgs.sandbox import (
    ExecutionResult,
    Outcome,
    SandboxLimits,
    run_program,
    scrubbed_env,
)

pytestmark = pytest.mark.timeout(60)


def _write(workspace: Path, code: str, name: str = "solution.py") -> Path:
    path = workspace / name
    path.write_text(textwrap.dedent(code))
    return path


def _run(workspace: Path, code: str, **limits) -> ExecutionResult:
    _write(workspace, code)
    limits.setdefault("timeout_s", 20.0)
    return run_program(workspace, "solution.py", SandboxLimits(**limits))


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


def _gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting for init to reap it)."""
    if not psutil.pid_exists(pid):
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for_file(path: Path, lines: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= lines:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never got {lines} lines")


def test_ok_run_captures_stdout_and_logs(tmp_path: Path) -> None:
    result = _run(tmp_path, "print('hello from the candidate')\n")

    assert result.outcome is Outcome.OK
    assert result.outcome == "ok"
    assert result.returncode == 0
    assert result.error is None and result.traceback_tail is None
    assert "hello from the candidate" in result.stdout_tail
    assert (tmp_path / "logs" / "stdout.txt").read_text() == "hello from the candidate\n"
    assert result.runtime_s > 0
    assert result.peak_rss_mb is not None and result.peak_rss_mb > 1


def test_raising_script_is_buggy_with_exception_line_and_traceback(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import sys
        def load(row):
            return row["Cabin"]
        print("about to fail", file=sys.stderr)
        load({})
        """,
    )

    assert result.outcome is Outcome.BUGGY
    assert result.returncode == 1
    assert result.error == "KeyError: 'Cabin'"
    assert result.traceback_tail is not None
    assert result.traceback_tail.startswith("Traceback (most recent call last):")
    assert 'return row["Cabin"]' in result.traceback_tail
    assert "about to fail" in result.stderr_tail
    assert "about to fail" not in result.traceback_tail


def test_syntax_error_and_plain_exit_code_are_buggy(tmp_path: Path) -> None:
    result = _run(tmp_path, "x = (\n")
    assert result.outcome is Outcome.BUGGY
    assert result.error is not None and result.error.startswith("SyntaxError")

    result = _run(tmp_path, "import sys\nprint('bad input', file=sys.stderr)\nsys.exit(3)\n")
    assert result.outcome is Outcome.BUGGY
    assert result.returncode == 3
    assert result.error == "bad input"


@pytest.mark.parametrize("variant", ["popen", "fork_setsid"])
def test_timeout_kills_whole_tree(tmp_path: Path, variant: str) -> None:
    pid_file = tmp_path / "pids.txt"
    spawn = {
        # A grandchild in the same process group.
        "popen": """
            child = subprocess.Popen(["sleep", "300"])
            record(child.pid)
        """,
        # A grandchild that leaves the session and forks a great-grandchild of its own.
        "fork_setsid": """
            pid = os.fork()
            if pid == 0:
                os.setsid()
                record(os.getpid())
                if os.fork() == 0:
                    record(os.getpid())
                    time.sleep(300)
                    os._exit(0)
                time.sleep(300)
                os._exit(0)
        """,
    }[variant]
    code = (
        textwrap.dedent(
            """
            import os, subprocess, time
            def record(pid):
                with open("pids.txt", "a") as fh:
                    fh.write(f"{pid}\\n")
            record(os.getpid())
            """
        )
        + textwrap.dedent(spawn)
        + "time.sleep(300)\n"
    )

    started = time.monotonic()
    result = _run(tmp_path, code, timeout_s=2.0)
    elapsed = time.monotonic() - started

    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 2.0 s"
    assert result.returncode is not None and result.returncode < 0
    assert 1.9 <= result.runtime_s < 3.0
    assert elapsed < 8.0
    pids = _pids(pid_file)
    assert len(pids) == {"popen": 2, "fork_setsid": 3}[variant]
    assert all(_gone(pid) for pid in pids), [(p, psutil.pid_exists(p)) for p in pids]


def test_background_process_of_a_finished_program_is_killed(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import subprocess
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        open("pids.txt", "w").write(f"{child.pid}\\n")
        """,
    )

    assert result.outcome is Outcome.OK
    assert all(_gone(pid) for pid in _pids(tmp_path / "pids.txt"))


def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-anthropic-key-for-tests")
    monkeypatch.setenv("OPENAI_API_KEY", "fake-openai-key-for-tests")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("PYTHONPATH", "/nowhere")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    result = _run(
        tmp_path,
        """
        import json, os
        json.dump(dict(os.environ), open("env.json", "w"))
        """,
        cpu_threads=3,
    )
    assert result.outcome is Outcome.OK

    import json

    env = json.loads((tmp_path / "env.json").read_text())
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "HTTPS_PROXY", "GITHUB_TOKEN", "PYTHONPATH"):
        assert name not in env
    assert "fake-anthropic-key-for-tests" not in json.dumps(env) and "fake-openai-key-for-tests" not in json.dumps(env)
    assert env["HOME"] == str(tmp_path.resolve())
    assert env["TMPDIR"] == str(tmp_path.resolve() / "tmp")
    assert (tmp_path / "tmp").is_dir()
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "3"
    assert env["MKL_NUM_THREADS"] == env["NUMEXPR_NUM_THREADS"] == "3"
    assert env["PYTHONUNBUFFERED"] == "1" and env["MPLBACKEND"] == "Agg"
    assert env["OPENBLAS_CORETYPE"] == "Haswell"


def test_scrubbed_env_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("SOME_RANDOM_SETTING", "x")
    env = scrubbed_env(
        {"MY_FLAG": "1", "OPENAI_API_KEY": "sk", "no_proxy": "*", "HF_TOKEN": "t", "SORT_KEYS": "1"}
    )

    assert env["MY_FLAG"] == "1" and env["SORT_KEYS"] == "1"
    assert "OPENAI_API_KEY" not in env and "no_proxy" not in env and "HF_TOKEN" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env and "SOME_RANDOM_SETTING" not in env
    assert "HOME" not in env  # only set when a workspace is given
    assert env["PATH"] == os.environ["PATH"]


def test_allocation_beyond_limit_is_oom(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        chunks = []
        for _ in range(2048):              # 2 GB in 1 MB chunks
            chunks.append(b"x" * (1 << 20))
        print("allocated everything")
        """,
        memory_mb=300,
    )

    assert result.outcome is Outcome.OOM
    assert result.error is not None
    assert result.error.startswith("memory limit of 300 MB exceeded")
    assert "allocated everything" not in result.stdout_tail


def test_tree_rss_watchdog_catches_many_small_processes(tmp_path: Path) -> None:
    # Each process stays under the per-process RLIMIT_AS, the tree does not.
    result = _run(
        tmp_path,
        """
        import subprocess, sys, time
        hog = "import time; x = b'x' * (150 << 20); time.sleep(60)"
        procs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
        with open("pids.txt", "w") as fh:
            fh.write("\\n".join(str(p.pid) for p in procs))
        time.sleep(60)
        """,
        memory_mb=300,
    )

    assert result.outcome is Outcome.OOM
    assert result.error.startswith("memory limit of 300 MB exceeded (") and "MiB in processes" in result.error
    assert result.peak_rss_mb is not None and result.peak_rss_mb > 300
    assert result.runtime_s < 15
    assert all(_gone(pid) for pid in _pids(tmp_path / "pids.txt"))


def test_output_is_capped(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        """
        import sys
        for i in range(20000):
            print(f"line {i}")
            print(f"err {i}", file=sys.stderr)
        """,
        tail_chars=500,
    )

    assert result.outcome is Outcome.OK
    assert len(result.stdout_tail) == 500 and len(result.stderr_tail) == 500
    assert result.stdout_tail.endswith("line 19999\n")
    assert result.stderr_tail.endswith("err 19999\n")
    assert (tmp_path / "logs" / "stdout.txt").stat().st_size > 100_000


def test_cancel_stops_a_running_program(tmp_path: Path) -> None:
    _write(
        tmp_path,
        """
        import os, time
        open("pids.txt", "w").write(f"{os.getpid()}\\n")
        time.sleep(300)
        """,
    )
    cancel = threading.Event()
    results: list[ExecutionResult] = []
    worker = threading.Thread(
        target=lambda: results.append(
            run_program(tmp_path, "solution.py", SandboxLimits(timeout_s=60), cancel=cancel)
        )
    )
    worker.start()
    _wait_for_file(tmp_path / "pids.txt", 1)
    started = time.monotonic()
    cancel.set()
    worker.join(timeout=10)

    assert not worker.is_alive()
    assert time.monotonic() - started < 3.0
    (result,) = results
    assert result.outcome is Outcome.CANCELLED
    assert result.error is not None and result.error.startswith("cancelled after")
    assert all(_gone(pid) for pid in _pids(tmp_path / "pids.txt"))


def test_cancel_set_before_start_does_not_run(tmp_path: Path) -> None:
    _write(tmp_path, "open('ran.txt', 'w').write('yes')\n")
    cancel = threading.Event()
    cancel.set()
    result = run_program(tmp_path, "solution.py", SandboxLimits(timeout_s=5), cancel=cancel)

    assert result.outcome is Outcome.CANCELLED and result.returncode is None
    assert not (tmp_path / "ran.txt").exists()


def test_the_end_of_the_callers_budget_cancels_rather_than_times_out(tmp_path: Path) -> None:
    """A program stopped because the run's budget ended before its own limit did not pass its
    limit: CANCELLED (no verdict), not TIMEOUT; a budget past the limit changes nothing."""
    _write(tmp_path, "import time\ntime.sleep(30)\n")
    started = time.monotonic()
    result = run_program(tmp_path, "solution.py", SandboxLimits(timeout_s=60), cancel_after_s=1.0)
    assert time.monotonic() - started < 10
    assert result.outcome is Outcome.CANCELLED
    assert result.error == "stopped after 1s: the run's time budget ended"
    later = run_program(tmp_path, "solution.py", SandboxLimits(timeout_s=1), cancel_after_s=5.0)
    assert later.outcome is Outcome.TIMEOUT and later.error == "timed out after 1.0 s"


def test_keyboard_interrupt_kills_tree_and_reraises(tmp_path: Path) -> None:
    _write(
        tmp_path,
        """
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        open("pids.txt", "w").write(f"{os.getpid()}\\n{child.pid}\\n")
        time.sleep(300)
        """,
    )
    pid_file = tmp_path / "pids.txt"

    def interrupt_when_running() -> None:
        _wait_for_file(pid_file, 2)
        _thread.interrupt_main()  # as if Ctrl-C reached the parent

    # interrupt_main() does nothing while SIGINT is ignored (background jobs of a shell).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_running, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_program(tmp_path, "solution.py", SandboxLimits(timeout_s=10))
    finally:
        signal.signal(signal.SIGINT, previous)

    assert time.monotonic() - started < 10
    assert all(_gone(pid) for pid in _pids(pid_file))


def test_escaped_daemon_is_found_by_its_environment(tmp_path: Path) -> None:
    # Double fork + setsid with the middle process exiting at once: no snapshot of the tree
    # can see the daemon; the sandbox's environment marker does.
    result = _run(
        tmp_path,
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open("pids.txt", "w").write(f"{os.getpid()}\\n")
                time.sleep(300)
            os._exit(0)
        while not os.path.exists("pids.txt"):
            time.sleep(0.01)
        """,
    )

    assert result.outcome is Outcome.OK
    assert all(_gone(pid) for pid in _pids(tmp_path / "pids.txt"))


def test_missing_workspace_or_script_is_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workspace"):
        run_program(tmp_path / "absent", "solution.py", SandboxLimits(timeout_s=5))
    with pytest.raises(ValueError, match="does not exist"):
        run_program(tmp_path, "solution.py", SandboxLimits(timeout_s=5))


@pytest.mark.skipif(shutil.which("python3") is None, reason="no python3 on PATH")
def test_custom_interpreter(tmp_path: Path) -> None:
    _write(tmp_path, "import sys; print(sys.argv[0])\n")
    result = run_program(
        tmp_path, "solution.py", SandboxLimits(timeout_s=10), python="python3"
    )
    assert result.outcome is Outcome.OK
    assert result.stdout_tail.strip() == "solution.py"
