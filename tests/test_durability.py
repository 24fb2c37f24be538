"""SIGKILL of the engine mid-run, then resume: finished nodes intact, only the in-flight
candidate re-run, and LLM spend for finished nodes not repeated (ledger and fake API agree)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from fake_anthropic import FakeAnthropic, distinct_programs, tool_reply
from mcgs.coders import CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.node import Operator
from mcgs.profile import profile_task
from mcgs.sandbox import live_candidates
from mcgs.task import load_task


def _rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # the database is being created
        return []
    finally:
        con.close()


@pytest.mark.slow
def test_sigkill_then_resume_keeps_finished_nodes_and_their_spend(tmp_path):
    task = build_demo_task(tmp_path / "task")
    spec = load_task(task)
    code = RecipeCoder(models=("model.logistic_regression",)).write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=profile_task(spec))).code
    # long enough to outlast the checks below on a loaded machine (with 8 s it finished before the
    # kill once, while other searches shared the two cores)
    slow = code.replace("import numpy as np", "import time\ntime.sleep(15)\nimport numpy as np", 1)
    lr = distinct_programs(code, "lr")
    replies = [lr(), lr(), tool_reply({"plan": "slow lr", "code": slow})]
    run = tmp_path / "run"
    db = run / "mcgs.db"
    with FakeAnthropic(replies, default=lr) as fake:
        env = {**os.environ, "ANTHROPIC_API_KEY": "test-key-not-real", "MCGS_LLM__BASE_URL": fake.base_url, "MCGS_ENSEMBLE": "false",
               "MCGS_LEASE_S": "3",  # a heartbeat every second
               "MCGS_LLM__MODEL_REVIEW": "false"}  # the replies are programs in order; the Code Review's calls have their own tests
        cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run), "--coder", "anthropic", "--plans", "0",
               "--max-nodes", "4", "--time-budget", "5m", "--policy", "greedy"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # two nodes finished and the third (slow) running
            if db.is_file() and _rows(db, "select count(*) from nodes where state = 'running'") == [(1,)] and \
                    _rows(db, "select count(*) from nodes where state = 'valid'") == [(2,)]:
                break
            time.sleep(0.2)
        else:
            proc.kill()
            proc.wait(30)
            raise AssertionError("the run never reached two finished nodes and a running one")
        # the engine stores its clock while a candidate runs, not only when one finishes: a kill
        # loses at most a beat of the spend
        e0 = _rows(db, "select elapsed_s from runs")[0][0]
        time.sleep(2.5)
        assert _rows(db, "select count(*) from nodes where state = 'running'") == [(1,)]
        assert _rows(db, "select elapsed_s from runs")[0][0] > e0 + 1.0
        before = _rows(db, "select id, seq, state, score, code from nodes where state = 'valid' order by seq")
        spent = _rows(db, "select node_seq, request_id, cost_usd from llm_calls order by id")
        calls_before = len(fake.requests)
        # a second engine on the live run is refused, names the live one and changes nothing
        second = subprocess.run([sys.executable, "-m", "mcgs", "resume", str(run)], capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 2 and f"being searched by process {proc.pid}" in second.stderr and "mcgs worker" in second.stderr, second.stderr
        assert _rows(db, "select status from runs") == [("running",)] and proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        # the killed engine could not record "stopped": status must not call the run live, and --watch must end
        shown = subprocess.run([sys.executable, "-m", "mcgs", "status", str(run), "--watch"], capture_output=True, text=True, env=env, timeout=120)
        assert shown.returncode == 0 and "engine is gone" in shown.stdout and f"\nresume: mcgs resume {run}\n" in shown.stdout, shown.stdout + shown.stderr
        assert _rows(db, "select status from runs") == [("running",)]  # status only reads
        try:
            res = subprocess.run([sys.executable, "-m", "mcgs", "resume", str(run)], capture_output=True, text=True, env=env, timeout=600)
        finally:
            from mcgs.sandbox import kill_candidates

            kill_candidates(tmp_path)
        assert res.returncode == 0, res.stderr[-2000:]
        assert live_candidates(under=tmp_path) == []  # resume cleared what the killed engine left
        after_calls = len(fake.requests)
    assert _rows(db, "select id, seq, state, score, code from nodes where seq <= 2 and state = 'valid' order by seq") == before
    states = {seq: (state, attempts) for seq, state, attempts in _rows(db, "select seq, state, attempts from nodes where seq > 0")}
    # the candidate in flight at the kill is the only one run again: same node, same program, second claim
    assert states[3] == ("valid", 2) and sum(s == "valid" for s, _ in states.values()) == 4
    assert "time.sleep(15)" in _rows(db, "select code from nodes where seq = 3")[0][0]
    ledger = _rows(db, "select node_seq, request_id, cost_usd from llm_calls order by id")
    assert ledger[: len(spent)] == spent  # nothing spent before the kill is lost or repeated
    assert {seq for seq, _, _ in ledger[len(spent):]}.isdisjoint({1, 2, 3})  # not even the in-flight node's program
    assert after_calls - calls_before == len(ledger) - len(spent)
    assert _rows(db, "select status from runs") == [("finished",)]
