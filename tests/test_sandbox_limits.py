"""Limits the sandbox enforces beyond time (issue 31, section 3): memory in the private /tmp and
/dev/shm, a disk cap, proportional memory of fork pools, and a process limit, each failure
labelled by what happened."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from mcgs.sandbox import ISOLATION_NAMESPACES, ISOLATION_SESSION, Outcome, SandboxLimits, live_candidates, namespace_isolation_available, run_program

pytestmark = pytest.mark.timeout(180)


def _needs_namespaces() -> None:
    if not namespace_isolation_available():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true but the namespace sandbox (bubblewrap) is unavailable")
        pytest.skip("bubblewrap is not installed or cannot create namespaces here")


def _run(tmp_path: Path, code: str, **limits):
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "solution.py").write_text(textwrap.dedent(code))
    limits.setdefault("timeout_s", 60.0)
    return run_program(ws, "solution.py", SandboxLimits(**limits)), ws


@pytest.mark.parametrize("where", ["/tmp", "/dev/shm"])
def test_memory_kept_in_the_private_tmpfs_counts_against_the_limit(tmp_path, where):
    _needs_namespaces()
    res, _ = _run(tmp_path, f"""
        import time
        with open({where!r} + '/blob', 'wb') as fh:
            for _ in range(60):
                fh.write(b'x' * (10 << 20))
                fh.flush()
                time.sleep(0.05)
        print('kept 600 MiB in {where}')
        time.sleep(5)
    """, memory_mb=300, isolation=ISOLATION_NAMESPACES)
    assert res.outcome is Outcome.OOM, (res.outcome, res.error, res.stderr_tail[-500:])
    assert "kept 600 MiB" not in res.stdout_tail
    assert "/tmp and /dev/shm" in res.error


def test_a_workspace_past_its_disk_cap_fails_as_disk(tmp_path):
    res, ws = _run(tmp_path, """
        import os, time
        os.makedirs('working', exist_ok=True)
        for i in range(40):
            with open(f'working/part{i}.bin', 'wb') as fh:
                fh.write(os.urandom(1 << 20))
            time.sleep(0.02)
        print('wrote 40 MiB')
        time.sleep(10)
    """, disk_mb=16)
    assert res.outcome is Outcome.DISK, (res.outcome, res.error)
    assert res.error.startswith("disk cap of 16 MiB exceeded (the workspace took") and res.runtime_s < 8


def test_one_file_past_the_disk_cap_is_refused_at_once(tmp_path):
    res, ws = _run(tmp_path, """
        with open('big.bin', 'wb') as fh:
            fh.write(b'x' * (64 << 20))
        print('wrote 64 MiB')
    """, disk_mb=16)
    assert res.outcome is Outcome.DISK, (res.outcome, res.error)
    assert "disk cap of 16 MiB exceeded" in res.error and "File too large" in res.error
    assert (ws / "big.bin").stat().st_size <= 16 << 20


@pytest.mark.parametrize("isolation", [ISOLATION_SESSION, ISOLATION_NAMESPACES])
def test_a_fork_pool_sharing_one_array_is_measured_by_proportional_size(tmp_path, isolation):
    """Four children reading one 300 MiB block share its pages: resident sizes add up to 1.5 GiB,
    the tree's real use (PSS) is about 300 MiB, under the 800 MiB limit."""
    if isolation == ISOLATION_NAMESPACES:
        _needs_namespaces()
    res, _ = _run(tmp_path, """
        import os, time
        block = bytearray(os.urandom(1 << 20)) * 300
        pids = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                total = sum(block[::4096])  # touch every page: shared, not copied
                time.sleep(3)
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)
        print('pool done')
    """, memory_mb=800, isolation=isolation)
    assert res.outcome is Outcome.OK, (res.outcome, res.error)
    assert "pool done" in res.stdout_tail and res.peak_rss_mb > 800  # what the old RSS sum would have killed


@pytest.mark.parametrize("isolation", [ISOLATION_SESSION, ISOLATION_NAMESPACES])
def test_a_fork_bomb_is_labelled_by_the_process_limit(tmp_path, isolation):
    if isolation == ISOLATION_NAMESPACES:
        _needs_namespaces()
    res, _ = _run(tmp_path, """
        import os, time
        for _ in range(400):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        time.sleep(30)
    """, max_processes=64, isolation=isolation, memory_mb=4096)
    assert res.outcome is Outcome.PROCESS_LIMIT, (res.outcome, res.error, res.stderr_tail[-300:])
    assert "process limit of 64 reached" in res.error
    assert live_candidates(under=tmp_path) == []


def test_the_engine_stores_disk_and_process_failures_as_their_own_states(tmp_path):
    from mcgs.node import NodeState
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    from test_task import write_task

    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    for name, code, state in (
        ("disk", "open('working/oof.csv', 'wb').write(b'x' * (64 << 20))\n", NodeState.DISK),
        ("fork", "import os, time\nfork = getattr(os, 'fo' + 'rk')\nfor _ in range(300):\n    if fork() == 0:\n        time.sleep(20); os._exit(0)\n"
                 "time.sleep(20)\nopen('working/oof.csv'); open('working/test_pred.csv'); open('submission/submission.csv')\n",
         NodeState.PROCESS_LIMIT),
    ):
        baseline = tmp_path / f"{name}.py"
        baseline.write_text(code + "OUTPUTS = ('working/oof.csv', 'working/test_pred.csv', 'submission/submission.csv')\n")
        settings = SearchSettings(time_budget_s=120, per_run_timeout_s=30, max_nodes=1, ensemble=False, disk_mb=16)
        search = create_search(task, tmp_path / f"run-{name}", settings=settings, baseline=baseline)
        search.run()
        node = next(n for n in search.nodes() if n.config.get("baseline"))
        assert node.state is state, (node.state, node.error)
        assert node.state.is_failure() and node.reward == -1
        search.storage.close()


def test_a_candidate_cut_by_the_end_of_the_run_budget_is_interrupted_not_timed_out(tmp_path):
    """The run's time budget ends before the candidate's own limit: the sandbox reports the run
    CANCELLED, so the node carries no verdict (INTERRUPTED, no reward) rather than a TIMEOUT the
    policy would debug, and a resume with more budget runs the same program again."""
    from mcgs.node import NodeState
    from mcgs.search import create_search
    from mcgs.settings import SearchSettings

    from test_task import write_task

    task = write_task(tmp_path / "task", task={"metric": "accuracy"})
    baseline = tmp_path / "slow.py"
    baseline.write_text("import time\ntime.sleep(120)\nOUTPUTS = ('working/oof.csv', 'working/test_pred.csv', 'submission/submission.csv')\n")
    settings = SearchSettings(time_budget_s=12, per_run_timeout_s=300, node_timeout_share=1.0, max_nodes=1, ensemble=False)
    search = create_search(task, tmp_path / "run", settings=settings, baseline=baseline)
    search.run()
    node = next(n for n in search.nodes() if n.config.get("baseline"))
    assert node.state is NodeState.INTERRUPTED and node.reward is None, (node.state, node.error)
    assert node.error.startswith("stopped after") and node.error.endswith("the run's time budget ended")
    assert node.runtime_s < 15
    search.storage.close()
