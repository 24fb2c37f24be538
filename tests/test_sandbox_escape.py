"""Escape attempts against the namespace sandbox (bubblewrap): each must fail, and the engine
must carry on. Skipped where bubblewrap is missing, except under CI=true, where the strong
sandbox is required."""

from __future__ import annotations

import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest

from mcgs.sandbox import (
    ISOLATION_NAMESPACES,
    Outcome,
    SandboxLimits,
    live_candidates,
    namespace_isolation_available,
    resolve_isolation,
    run_program,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", autouse=True)
def _needs_namespaces():
    if not namespace_isolation_available():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true but the namespace sandbox (bubblewrap) is unavailable")
        pytest.skip("bubblewrap is not installed or cannot create namespaces here")


def _run(tmp_path: Path, code: str, **limits):
    run = tmp_path / "run"
    (run / "input").mkdir(parents=True, exist_ok=True)
    (run / "input" / "train.csv").write_text("a,b\n1,2\n")
    ws = run / "nodes" / "00001"
    ws.mkdir(parents=True, exist_ok=True)
    if not (ws / "input").exists():
        (ws / "input").symlink_to("../../input", target_is_directory=True)
    (ws / "solution.py").write_text(textwrap.dedent(code))
    limits.setdefault("timeout_s", 30.0)
    return run_program(ws, "solution.py", SandboxLimits(isolation=ISOLATION_NAMESPACES, **limits)), ws


def _still_works(tmp_path: Path) -> None:
    res, _ = _run(tmp_path / "after", "print(open('input/train.csv').read().splitlines()[0])")
    assert res.outcome is Outcome.OK and res.stdout_tail.strip() == "a,b"


def test_the_program_reads_its_input_and_writes_its_workspace_only(tmp_path):
    outside = tmp_path / "outside.txt"
    res, ws = _run(tmp_path, f"""
        import os
        open('working.txt', 'w').write('ok')
        print(open('input/train.csv').read().splitlines()[0])
        for target in ({str(outside)!r}, 'input/new.csv', '/etc/mcgs', '/usr/mcgs'):
            try:
                open(target, 'w').write('x')
                print('WROTE', target)
            except OSError as exc:
                print('refused', target, type(exc).__name__)
    """)
    assert res.outcome is Outcome.OK, res.stderr_tail
    assert "WROTE" not in res.stdout_tail and res.stdout_tail.count("refused") == 4
    assert (ws / "working.txt").read_text() == "ok" and not outside.exists()
    assert not (tmp_path / "run" / "input" / "new.csv").exists()


def test_held_out_answers_and_other_nodes_are_not_visible(tmp_path):
    private = tmp_path / "data" / "prepared" / "private" / "answers.csv"
    private.parent.mkdir(parents=True)
    private.write_text("id,label\n1,secret\n")
    os.chmod(private, 0o644)
    other = tmp_path / "run" / "nodes" / "00002" / "solution.py"
    other.parent.mkdir(parents=True)
    other.write_text("OTHER_NODE_CODE = 1\n")
    res, _ = _run(tmp_path, f"""
        import os
        for path in ({str(private)!r}, {str(other)!r}, '/root/.bashrc', '/proc/1/environ'):
            try:
                print('READ', path, open(path).read()[:20])
            except OSError as exc:
                print('hidden', path, type(exc).__name__)
        print('nodes:', sorted(os.listdir('..')))
    """)
    assert res.outcome is Outcome.OK, res.stderr_tail
    assert "secret" not in res.stdout_tail and "OTHER_NODE_CODE" not in res.stdout_tail
    assert "nodes: ['00001']" in res.stdout_tail
    _still_works(tmp_path)


def test_no_network_not_even_the_hosts_loopback(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(5)
    port = server.getsockname()[1]
    accepted: list = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    res, _ = _run(tmp_path, f"""
        import socket
        try:
            socket.create_connection(('127.0.0.1', {port}), timeout=3)
            print('CONNECTED')
        except OSError as exc:
            print('no route', type(exc).__name__)
        try:
            socket.getaddrinfo('example.com', 443)
            print('RESOLVED')
        except OSError as exc:
            print('no dns', type(exc).__name__)
    """)
    t.join(6)
    server.close()
    assert res.outcome is Outcome.OK, res.stderr_tail
    assert "CONNECTED" not in res.stdout_tail and "RESOLVED" not in res.stdout_tail
    assert accepted == []


def test_secrets_in_the_engines_environment_do_not_reach_the_program(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "placeholder-value-one")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    res, _ = _run(tmp_path, """
        import os
        print(sorted(k for k in os.environ if 'KEY' in k or 'SECRET' in k))
        print(os.environ.get('ANTHROPIC_API_KEY'))
    """)
    assert res.outcome is Outcome.OK and "placeholder-value-one" not in res.stdout_tail and "aws-secret" not in res.stdout_tail


def test_a_fork_bomb_is_stopped_and_leaves_nothing_behind(tmp_path):
    res, _ = _run(tmp_path, """
        import os, time
        made, refused = 0, 0
        for _ in range(500):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                made += 1
            except OSError:
                refused += 1
        print('made', made, 'refused', refused)
    """, timeout_s=20.0)
    if os.geteuid() == 0:  # the program runs as nobody with a process-count limit
        made, refused = (int(x) for x in res.stdout_tail.split()[1::2])
        assert refused > 0 and made < 500
    time.sleep(0.5)
    assert live_candidates(under=tmp_path) == []
    _still_works(tmp_path)


def test_memory_past_the_limit_is_oom_and_a_background_child_is_gone(tmp_path):
    res, _ = _run(tmp_path, """
        x = bytearray(600 * 1024 * 1024)
        print('allocated')
    """, memory_mb=300)
    assert res.outcome is Outcome.OOM
    res, _ = _run(tmp_path / "bg", """
        import subprocess, sys
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)
        print('left a child')
    """)
    assert res.outcome is Outcome.OK
    time.sleep(0.5)
    assert live_candidates(under=tmp_path) == []


def test_auto_picks_namespaces_here():
    assert resolve_isolation("auto") == ISOLATION_NAMESPACES
    assert resolve_isolation("process-session") == "process-session"


@pytest.mark.slow
def test_twenty_candidates_that_time_out_leave_no_process_behind(tmp_path):
    code = """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])
        time.sleep(300)
    """
    for i in range(20):
        res, _ = _run(tmp_path / f"c{i}", code, timeout_s=1.0)
        assert res.outcome is Outcome.TIMEOUT
    time.sleep(0.5)
    assert live_candidates(under=tmp_path) == []
