"""The OpenAI-compatible path (``--coder openai``: vLLM, Ollama, llama.cpp, hosted APIs) against a
local fake server (tests/fake_openai.py): the real ``openai`` client, real request and response
JSON, no network and no key. The coder's cascade, budget, ledger and fallback are the ones the
Anthropic path has (tests/test_llm.py); here: the adapter's failure policy, JSON output for a
server without tool calling, prices of local models, and a search from the command line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fake_openai import FakeOpenAI, answer_reply, error_reply, text_reply
from mcgs.coders.anthropic import SolutionAnswer
from mcgs.llm import LLMUnavailable, MalformedAnswer, PromptTooLong, unknown_models_free
from mcgs.llm.openai_client import OpenAIClient, is_local_url
from mcgs.settings import LLMSettings

MODEL = "qwen-coder-local"
KW = dict(model=MODEL, system="S", user="U", answer=SolutionAnswer, tool_name="write_solution", tool_description="d", max_tokens=500)
GOOD = {"plan": "p", "code": "print('a complete program')"}


def _client(fake, **kw) -> OpenAIClient:
    return OpenAIClient(LLMSettings(base_url=fake.base_url, max_retries=2, **kw))


def test_client_asks_through_a_forced_function_call_and_maps_errors_to_the_failure_policy():
    script = [error_reply(503, "busy"), answer_reply(GOOD), error_reply(429, "slow down", headers={"retry-after": "1"}), answer_reply(GOOD),
              text_reply("I would use boosting."), answer_reply({"plan": "p"}), answer_reply(GOOD, finish="length"),
              error_reply(400, "This model's maximum context length is 32768 tokens", code="context_length_exceeded"),
              error_reply(404, "model not found"), error_reply(401, "bad key")]
    with FakeOpenAI(script) as fake:
        client = _client(fake)  # no OPENAI_API_KEY: a local server needs none
        ans, usage = client.ask(**KW)  # 503: retried by the SDK
        assert ans.plan == "p" and usage.input_tokens == 2000 and usage.cache_read_tokens == 1000 and usage.output_tokens == 500
        _, usage = client.ask(**KW)  # 429 with retry-after
        assert usage.latency_s >= 0.9
        body = fake.requests[-1]
        assert body["tool_choice"] == {"type": "function", "function": {"name": "write_solution"}}
        assert body["tools"][0]["function"]["parameters"]["required"] == ["plan", "code"] and body["messages"][0]["role"] == "system"
        with pytest.raises(MalformedAnswer, match="did not call the write_solution function"):  # prose
            client.ask(**KW)
        client.tools = True  # (prose made it switch to JSON output: see the next test)
        with pytest.raises(MalformedAnswer, match="did not validate"):  # the code field missing
            client.ask(**KW)
        with pytest.raises(MalformedAnswer, match="cut off"):
            client.ask(**KW)
        with pytest.raises(PromptTooLong):
            client.ask(**KW)
        with pytest.raises(LLMUnavailable) as e:
            client.ask(**KW)
        assert e.value.fatal and "not found" in str(e.value)
        with pytest.raises(LLMUnavailable) as e:
            client.ask(**KW)
        assert e.value.fatal and "OPENAI_API_KEY" in str(e.value)
        assert len(fake.requests) == len(script) == 10  # the 503 and the 429 were retried by the SDK itself


@pytest.mark.parametrize("mode", [False, "ignore"])
def test_a_server_without_tool_calling_is_asked_for_json_output(mode):
    """A server that refuses ``tools`` (400) or ignores them (prose) is asked from then on with
    ``response_format: json_object`` and the schema in the system message."""
    with FakeOpenAI(default=answer_reply(GOOD), tools=mode) as fake:
        client = _client(fake)
        if mode == "ignore":  # the first answer is prose: malformed, and the re-ask goes to JSON output
            with pytest.raises(MalformedAnswer):
                client.ask(**KW)
        ans, _ = client.ask(**KW)
        assert ans.code == GOOD["code"] and client.tools is False
        client.ask(**KW)
        last = fake.requests[-1]
        assert "tools" not in last and last["response_format"] == {"type": "json_object"}
        assert '"required": ["plan", "code"]' in last["messages"][0]["content"]


def test_a_hosted_api_needs_a_key_and_a_local_servers_models_cost_nothing(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(LLMUnavailable, match="OPENAI_API_KEY is not set") as e:
        OpenAIClient(LLMSettings(base_url="https://api.example.com/v1"))
    assert e.value.fatal
    assert is_local_url("http://localhost:11434/v1") and is_local_url("http://127.0.0.1:8000/v1") and is_local_url("http://10.0.3.7:8000/v1")
    assert not is_local_url("https://api.openai.com/v1") and not is_local_url(None)
    local, hosted = LLMSettings(base_url="http://localhost:8000/v1"), LLMSettings(base_url="https://api.example.com/v1")
    assert unknown_models_free("openai", local) and not unknown_models_free("openai", hosted) and not unknown_models_free("anthropic", local)
    assert local.price(MODEL, free_unknown=True).output == 0
    assert local.price(MODEL).output == max(p.output for p in local.prices.values())  # unknown and not local: the dearest
    assert local.price("claude-haiku-4-5", free_unknown=True).output > 0  # a listed price stays


@pytest.mark.slow
def test_mcgs_run_with_the_openai_coder_completes_with_ledger_budget_and_fallback(tmp_path):
    """``mcgs run --coder openai --base-url ... --model ...`` on the demo task: a 4-node search
    whose programs the fake server writes (the first answer prose, its re-ask not JSON: the
    recipe coder writes that node), priced by
    MCGS_LLM__PRICES so the budget stops the calls part-way; the recipe coder writes the rest."""
    from mcgs.coders import CoderRequest
    from mcgs.coders.recipe import RecipeCoder
    from mcgs.demo import build_demo_task
    from mcgs.node import Operator
    from mcgs.profile import profile_task
    from mcgs.search import open_search
    from mcgs.task import load_task

    task = build_demo_task(tmp_path / "demo")
    spec = load_task(task)
    good = RecipeCoder(models=("model.logistic_regression",)).write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=profile_task(spec))).code
    count = iter(range(1000))

    def program(body):
        if "review:" in body["messages"][0]["content"] or (body.get("tools") and body["tools"][0]["function"]["name"] == "review"):
            return answer_reply({"verdict": "pass", "problems": ["checked the folds and the outputs"]})  # the Code Review operator
        return answer_reply({"plan": "logistic regression", "code": good + f"\nVARIANT = {next(count)}\n", "knowledge_ids": ["model.logistic_regression"]})

    # one call costs 3 000 x 1 + 500 x 10 = 8 000 micro-dollars = $0.008 (worst case checked before: 8 192 output tokens)
    prices = '{"%s": {"input": 1.0, "output": 10.0, "cache_write": 1.0, "cache_read": 1.0}}' % MODEL
    env = {**os.environ, "MCGS_LLM__PRICES": prices, "MCGS_LLM__MAX_TOKENS": "1000"}
    env.pop("OPENAI_API_KEY", None)
    run = tmp_path / "run"
    with FakeOpenAI([text_reply("not an answer")], default=program, tools="ignore") as fake:
        cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run), "--coder", "openai", "--base-url", fake.base_url,
               "--model", MODEL, "--max-cost-usd", "0.05", "--policy", "greedy", "--plans", "0", "--max-nodes", "4", "--time-budget", "5m"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        requests = list(fake.requests)
    search = open_search(run)
    nodes = [n for n in search.nodes() if n.parent_id is not None and n.operator is not Operator.ENSEMBLE]
    assert len(nodes) == 4 and search.run_record.status == "finished" and search.settings.coder == "openai"
    by_model = [n for n in nodes if n.config.get("author") == MODEL]
    by_recipe = [n for n in nodes if str(n.config.get("author", "")).startswith("recipe (fallback")]
    assert by_model and by_recipe and len(by_model) + len(by_recipe) == 4
    assert all(n.config["coder"] == "openai" for n in by_model) and all(n.is_valid for n in by_model)
    assert any("budget" in n.config["author"] for n in by_recipe)
    calls = search.storage.llm_calls(search.run_id)
    assert calls and all(c.model == MODEL for c in calls)
    spent = sum(c.cost_usd for c in calls)
    assert spent <= 0.05 and spent == pytest.approx(0.008 * sum(c.input_tokens > 0 for c in calls), rel=1e-6)
    assert [c.outcome for c in calls][:2] == ["malformed", "malformed"] and calls[-1].outcome == "budget"
    assert requests[0].get("tools") and all("response_format" in r for r in requests[1:])  # prose once, then JSON output
    status = subprocess.run([sys.executable, "-m", "mcgs", "status", str(run)], capture_output=True, text=True, env=env, timeout=120)
    assert status.returncode == 0 and MODEL in status.stdout
    verdicts = [n.review["model_review"]["verdict"] for n in by_model]  # each reviewed by the model, while the budget covers it
    assert verdicts[0] == "pass" and set(verdicts) <= {"pass", "unavailable"}
    assert {c.kind for c in calls} >= {"code", "review"}
