"""End to end: ``mcgs run --coder anthropic`` on spaceship-titanic against the local fake of the
Messages API, which returns valid programs, a malformed answer, a 429 with retry-after, a 529,
a context-length error and a program that crashes. The run completes; every node says who
wrote it; the ledger equals the fake's usage; the prompts carry what the operators promise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fake_anthropic import FakeAnthropic, distinct_programs, error_reply, text_reply, tool_reply
from mcgs.coders import CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.mlebench import prepare_competition
from mcgs.node import Operator
from mcgs.profile import profile_task
from mcgs.search import open_search
from mcgs.task import load_task

pytestmark = pytest.mark.realdata
CHEAP = "fake-haiku"


@pytest.mark.slow
def test_run_with_the_anthropic_coder_survives_every_kind_of_bad_answer(shared_data, tmp_path):
    prepare_competition("spaceship-titanic", shared_data / "spaceship-titanic" / "raw", tmp_path / "data")
    task_dir = tmp_path / "data" / "spaceship-titanic"
    spec = load_task(task_dir)
    good = RecipeCoder(models=("model.logistic_regression",)).write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=profile_task(spec))).code
    crash = "raise KeyError('CRASH_MARKER_Cabin_deck')\n" + good
    ok = distinct_programs(good, "logistic regression on engineered features", knowledge_ids=["model.logistic_regression"])

    script = [
        ok(),  # draft 1
        text_reply("I think a gradient-boosting model would do well here."), ok(),  # draft 2: malformed, re-asked
        error_reply(429, "rate limited", {"retry-after": "1"}), ok(),  # draft 3: the SDK waits and retries
        error_reply(529, "overloaded"), ok(),  # draft 4: retried
        error_reply(400, "prompt is too long: 230000 tokens > 200000 maximum"),  # draft 5: shrunk once ...
        tool_reply({"plan": "same idea", "code": crash}),  # ... and its program crashes
    ]
    run = tmp_path / "run"
    with FakeAnthropic(script, default=ok) as fake:
        env = {**os.environ, "ANTHROPIC_API_KEY": "test-key-not-real", "MCGS_LLM__BASE_URL": fake.base_url, "MCGS_LLM__CHEAP_MODEL": CHEAP,
               "MCGS_LLM__MAX_RETRIES": "2", "MCGS_DEBUG_PROB": "1.0",
               "MCGS_LLM__MODEL_REVIEW": "false"}  # the script answers programs in order; the Code Review's calls are tested in test_llm.py
        cmd = [sys.executable, "-m", "mcgs", "run", str(task_dir), "--out", str(run), "--coder", "anthropic", "--policy", "greedy",
               "--plans", "0", "--max-nodes", "6", "--time-budget", "6m"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        requests, billed = list(fake.requests), list(fake.billed)
    assert "LLM spend" in res.stdout
    status = subprocess.run([sys.executable, "-m", "mcgs", "status", str(run)], capture_output=True, text=True, env=env, timeout=120)
    assert status.returncode == 0 and "LLM spend" in status.stdout and CHEAP in status.stdout and "nodes written by" in status.stdout

    search = open_search(run)
    nodes = [n for n in search.nodes() if n.parent_id is not None and n.operator is not Operator.ENSEMBLE]
    assert len(nodes) == 6 and search.run_record.status == "finished"
    assert all(n.config.get("author") for n in nodes), [n.config for n in nodes]
    assert {n.config["author"] for n in nodes} == {CHEAP}
    crashed = [n for n in nodes if n.state.is_failure()]
    assert [n.seq for n in crashed] == [5] and "CRASH_MARKER" in crashed[0].stderr_tail
    debug = next(n for n in nodes if n.operator is Operator.DEBUG)
    assert debug.parent_id == crashed[0].id and debug.is_valid

    calls = search.storage.llm_calls(search.run_id)
    assert sum(c.input_tokens for c in calls) == sum(u["input_tokens"] for u in billed)
    assert sum(c.output_tokens for c in calls) == sum(u["output_tokens"] for u in billed)
    assert sum(c.cache_write_tokens for c in calls) == sum(u["cache_creation_input_tokens"] for u in billed)
    assert sum(c.cache_read_tokens for c in calls) == sum(u["cache_read_input_tokens"] for u in billed)
    assert [c.outcome for c in calls].count("malformed") == 1 and [c.outcome for c in calls].count("error") == 1

    prefix = requests[0]["system"][0]["text"]
    assert spec.description[:60] in prefix and "# Data profile" in prefix and "HomePlanet" in prefix
    assert "## model." in prefix or "## data." in prefix  # knowledge entries
    debug_prompt = requests[-1]["messages"][0]["content"]
    assert "# Your job: Debug" in debug_prompt and "CRASH_MARKER_Cabin_deck" in debug_prompt and "raise KeyError" in debug_prompt
