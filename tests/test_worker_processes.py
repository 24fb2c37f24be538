"""Many `mcgs worker` processes on one run (issue 8, DESIGN §7): queued candidates are claimed
atomically over SQLite and PostgreSQL alike, and a worker that joins a live run searches too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter

import pytest

from mcgs.contract import constant_program
from mcgs.demo import build_demo_task
from mcgs.node import NodeState, Operator
from mcgs.sandbox import live_candidates
from mcgs.search import create_search
from mcgs.settings import SearchSettings

# A valid program that needs no library, so the test measures claiming, not modelling.
CONSTANT_PROGRAM = constant_program(0.5)

WORKERS = 8
QUEUED = 64  # 8 per worker: every claim contends with seven other processes


@pytest.mark.slow
def test_eight_worker_processes_claim_queued_candidates_once_each(storage_url, tmp_path):
    task = build_demo_task(tmp_path / "task")
    run_dir = tmp_path / "run"
    settings = SearchSettings(time_budget_s=3600, ensemble=False, coder="recipe", plan_candidates=0, cpu_threads=1)
    search = create_search(task, run_dir, settings=settings, storage=storage_url)
    root = search.nodes()[0]
    queued = [
        search.storage.add_node(search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan=f"queued {i}", code=CONSTANT_PROGRAM)
        for i in range(QUEUED)
    ]
    search.storage.close()
    cmd = [sys.executable, "-m", "mcgs", "worker", "--artifacts", str(run_dir), "--storage", storage_url, "--run", "run", "--drain"]
    env = {**os.environ, "COLUMNS": "200"}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(WORKERS)]
    outputs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err and "locked" not in err.lower() and "OperationalError" not in err, err[-3000:]

    claimed = [int(m) for out, err in outputs for m in re.findall(r"running node (\d+) \(attempt 1\)", out + err)]
    counts = Counter(claimed)
    assert sorted(counts) == sorted(n.seq for n in queued)  # every queued node ran ...
    assert max(counts.values()) == 1  # ... exactly once: no double claims
    done_per_worker = [len(re.findall(r"running node", out + err)) for out, err in outputs]
    assert sum(done_per_worker) == QUEUED and sum(d > 0 for d in done_per_worker) >= 2, done_per_worker

    from mcgs.storage import Storage

    st = Storage(storage_url)
    nodes = [n for n in st.get_nodes(st.get_run("run").id) if n.parent_id is not None]
    st.close()
    assert len(nodes) == QUEUED and all(n.state is NodeState.VALID and n.attempts == 1 for n in nodes)
    assert len({n.owner for n in nodes}) == sum(d > 0 for d in done_per_worker)
    assert live_candidates(under=tmp_path) == []


@pytest.mark.slow
def test_a_worker_process_joins_a_live_run_and_both_search(tmp_path):
    """`mcgs run` and one `mcgs worker` on the same run: both select, write and run nodes;
    the worker stops when the run finishes, and the run's best comes from either. A
    `mcgs status --watch` follows the run live and ends with it."""
    task = build_demo_task(tmp_path / "task")
    run_dir = tmp_path / "run"
    env = {**os.environ, "MCGS_ENSEMBLE": "false", "MCGS_NODE_TIMEOUT_SHARE": "1.0"}
    run = subprocess.Popen(
        [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run_dir), "--coder", "recipe", "--plans", "0",
         "--time-budget", "30s", "--cpu-threads", "1", "--models", "model.logistic_regression,model.lightgbm"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 60
    while not (run_dir / "mcgs.db").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    watch = subprocess.Popen([sys.executable, "-m", "mcgs", "status", str(run_dir), "--watch", "--interval", "0.5"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, "COLUMNS": "200"})
    worker = subprocess.run(
        [sys.executable, "-m", "mcgs", "worker", "--artifacts", str(run_dir)], capture_output=True, text=True, env=env, timeout=300,
    )
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-3000:]
    assert worker.returncode == 0, worker.stderr[-3000:]
    watched, werr = watch.communicate(timeout=60)  # the live view ends by itself when the run finishes
    assert watch.returncode == 0, werr[-2000:]
    assert "finished" in watched and "top " in watched and "lineage:" in watched
    from mcgs.storage import Storage

    st = Storage(f"sqlite:///{run_dir / 'mcgs.db'}")
    nodes = [n for n in st.get_nodes(st.list_runs()[0].id) if n.parent_id is not None]
    st.close()
    owners = Counter(n.owner for n in nodes)
    assert len(owners) == 2, owners  # the run's process and the worker each made and ran nodes
    assert all(n.state is not NodeState.RUNNING and n.state is not NodeState.PENDING for n in nodes)
    assert (run_dir / "best" / "submission.csv").is_file()
    assert live_candidates(under=tmp_path) == []


def test_status_shows_nodes_in_flight_their_workers_and_the_queue(tmp_path):
    from typer.testing import CliRunner

    from mcgs.cli import app

    task = build_demo_task(tmp_path / "task")
    search = create_search(task, tmp_path / "run", settings=SearchSettings(coder="recipe", plan_candidates=0))
    root = search.nodes()[0]
    for owner in ("host-a:1:1", "host-b:2:1", None):
        n = search.storage.add_node(search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="", code=CONSTANT_PROGRAM, owner=owner)
        if owner:
            search.storage.set_running(n.id, f"nodes/{n.seq:05d}")
    search.storage.close()
    result = CliRunner().invoke(app, ["status", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "in flight: 2 node(s) on 2 worker(s); 1 queued" in result.output


def test_a_worker_starts_no_node_once_the_engine_ensembles_or_a_budget_is_spent(tmp_path):
    """A joining worker stops launching when the engine builds the final ensemble, when running
    and finished nodes together fill the node budget, and on the engine's clock (the elapsed
    time stored at its last write plus the time since), not on a clock of its own that starts
    from that stored figure."""
    import sqlite3

    from mcgs.search import open_search

    task = build_demo_task(tmp_path / "task")
    run_dir = tmp_path / "run"
    create_search(task, run_dir, settings=SearchSettings(coder="recipe", plan_candidates=0, max_nodes=3, time_budget_s=600)).storage.close()
    s = open_search(run_dir)
    root = s.nodes()[0]

    def add(owner=None):
        return s.storage.add_node(s.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="", code=CONSTANT_PROGRAM, owner=owner)

    s.storage.finish_node(add("engine:1:1").id, state=NodeState.VALID, score=0.5)
    queued = add()
    # the engine is building the final ensemble: nothing is claimed, not even a queued node
    s.storage.update_run(s.run_id, status="ensembling")
    assert s.work() == 0 and {n.seq: n.state for n in s.nodes()}[queued.seq] is NodeState.PENDING
    # running nodes of another process count against the node budget (3): 1 done + 2 running
    s.storage.update_run(s.run_id, status="running")
    running = [add("engine:1:1") for _ in range(2)]
    for n in running:
        s.storage.set_running(n.id, f"nodes/{n.seq:05d}")
    assert s.budget_exhausted() == "node budget spent"
    s.storage.close()
    # the engine's clock: 0 s stored as spent, but its last write was 650 s ago, on a 600 s budget
    con = sqlite3.connect(run_dir / "mcgs.db")
    con.execute("update nodes set state = 'interrupted' where state = 'running'")
    con.execute("update runs set elapsed_s = 0, updated_at = datetime('now', '-650 seconds')")
    con.commit()
    con.close()
    s = open_search(run_dir)
    assert s.budget_exhausted() is None  # its own clock, at the stored 0 s, would launch
    assert s.work() == 0 and {n.seq: n.state for n in s.nodes()}[queued.seq] is NodeState.PENDING
    s.storage.close()


def test_more_workers_than_cpu_threads_or_threads_than_cores_is_warned_at_the_start(tmp_path):
    task = build_demo_task(tmp_path / "task")
    cores = os.cpu_count() or 1
    for i, (workers, threads, says) in enumerate([(1, 1, []), (3, 2, ["3 workers with 2 CPU thread(s)"]), (1, cores + 1, [f"{cores + 1} CPU threads"])]):
        search = create_search(task, tmp_path / f"run{i}", settings=SearchSettings(coder="recipe", plan_candidates=0, workers=workers,
                                                                                   cpu_threads=threads, ensemble=False))
        said = []
        search.say = said.append
        search._search_loop = lambda: None  # the warning is said at the start; no candidate is needed
        search.run()
        search.storage.close()
        warned = [m for m in said if m.startswith("warning:")]
        assert len(warned) == len(says) and all(w in m for w, m in zip(says, warned)), said



def test_a_worker_on_a_finished_run_says_there_is_nothing_to_do(tmp_path):
    from typer.testing import CliRunner

    from mcgs.cli import app

    task = build_demo_task(tmp_path / "task")
    search = create_search(task, tmp_path / "run", settings=SearchSettings(coder="recipe", plan_candidates=0))
    search.storage.update_run(search.run_id, status="finished")
    search.storage.close()
    result = CliRunner().invoke(app, ["worker", "--artifacts", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "is finished: no node is left to work on" in result.output, result.output


def test_a_worker_on_the_engines_machine_is_warned_when_their_threads_exceed_the_cores(tmp_path):
    from typer.testing import CliRunner

    from mcgs.cli import app
    from mcgs.engine_lock import acquire

    task = build_demo_task(tmp_path / "task")
    cores = os.cpu_count() or 1
    search = create_search(task, tmp_path / "run", settings=SearchSettings(coder="recipe", plan_candidates=0, cpu_threads=cores, max_nodes=1))
    root = search.nodes()[0]
    done = search.storage.add_node(search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="", code=CONSTANT_PROGRAM, owner="e:1:1")
    search.storage.finish_node(done.id, state=NodeState.VALID, score=0.5)  # the node budget is spent: the worker exits at once
    search.storage.close()
    lock = acquire(tmp_path / "run")  # an engine of this process, on this machine
    try:
        result = CliRunner().invoke(app, ["worker", "--artifacts", str(tmp_path / "run")], env={"COLUMNS": "300"})
    finally:
        lock.close()
    assert result.exit_code == 0, result.output
    assert f"the run's engine (process {os.getpid()}) runs on this machine too" in result.output and "may time out" in result.output
    result = CliRunner().invoke(app, ["worker", "--artifacts", str(tmp_path / "run")], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "runs on this machine too" not in result.output  # no live engine
