"""The Anthropic coder against a local fake of the Messages API (tests/fake_anthropic.py):
the real SDK client, real request/response JSON, no network and no key."""

from __future__ import annotations

import dataclasses

import pytest

from fake_anthropic import FakeAnthropic, error_reply, text_reply, tool_reply
from mcgs.coders import CoderRequest, CoderStop, config_key, program_key
from mcgs.coders.anthropic import AnthropicCoder, chain_failures
from mcgs.coders.recipe import RecipeCoder
from mcgs.llm import AnthropicClient, LLMUnavailable, MalformedAnswer, PromptTooLong
from mcgs.node import FrozenNode, NodeState, Operator
from mcgs.search import create_search, open_search
from mcgs.settings import LLMSettings, ModelPrice, SearchSettings
from mcgs.profile import profile_task
from recipe_runs import make_task

FAST = ("model.logistic_regression",)
CHEAP, STRONG = "cheap-model", "strong-model"


def _settings(fake: FakeAnthropic, **llm) -> SearchSettings:
    # the Code Review operator's model review (on by default) has its own tests below; the others leave it out of their call counts
    base = dict(base_url=fake.base_url, max_retries=2, cheap_model=CHEAP, strong_model=STRONG, max_tokens=1000, model_review=False)
    base.update(llm)
    return SearchSettings(time_budget_s=300, num_drafts=2, max_nodes=4, seed=0, policy="tree", ensemble=False, coder="anthropic", llm=LLMSettings(**base))


def _search(tmp_path, fake, **llm):
    task = make_task(tmp_path / "t", "binary")
    settings = _settings(fake, **llm)
    coder = AnthropicCoder(settings, fallback=RecipeCoder(models=FAST), client=AnthropicClient(settings.llm, api_key="test-key"))
    return create_search(task, tmp_path / "run", settings=settings, coder=coder), coder


def _request(search, operator=Operator.DRAFT, **kw) -> CoderRequest:
    return CoderRequest(operator=operator, task=search.task, profile=search.profile, per_run_timeout_s=60.0, node_seq=1, **kw)


def _valid_code(search) -> str:
    return RecipeCoder(models=FAST).write(_request(search)).code


def _node(seq, state=NodeState.VALID, op=Operator.DRAFT, score=0.8, code="print('x')\n" * 3, config=None, **kw) -> FrozenNode:
    return FrozenNode(id=seq, seq=seq, parent_id=0, operator=op, state=state, score=score if state is NodeState.VALID else None, code=code, config=config or {}, **kw)


# ----------------------------------------------------------------- the adapter


def test_client_maps_api_errors_to_the_failure_policy():
    ok = tool_reply({"plan": "p", "code": "print('a complete program')"})
    script = [error_reply(529, "overloaded"), ok, error_reply(429, "slow down", {"retry-after": "1"}), ok, text_reply("here is my idea"),
              error_reply(400, "prompt is too long: 210000 tokens > 200000 maximum"), error_reply(404, "model: nope"), error_reply(401, "invalid x-api-key")]
    from mcgs.coders.anthropic import SolutionAnswer

    with FakeAnthropic(script) as fake:
        client = AnthropicClient(LLMSettings(base_url=fake.base_url, max_retries=2), api_key="test-key")
        kw = dict(model=CHEAP, system="S", user="U", answer=SolutionAnswer, tool_name="write_solution", tool_description="d", max_tokens=500)
        ans, usage = client.ask(**kw)  # 529 overloaded: retried by the SDK
        assert ans.plan == "p" and usage.request_id == "req_fake_0002" and usage.cache_write_tokens == 2000
        _, usage = client.ask(**kw)  # 429 with retry-after: 1 s
        assert usage.latency_s >= 0.9
        with pytest.raises(MalformedAnswer) as e:
            client.ask(**kw)
        assert e.value.usage.output_tokens == 500  # billed even though unusable
        with pytest.raises(PromptTooLong):
            client.ask(**kw)
        with pytest.raises(LLMUnavailable) as e:
            client.ask(**kw)
        assert e.value.fatal and "not found" in str(e.value)
        with pytest.raises(LLMUnavailable) as e:
            client.ask(**kw)
        assert e.value.fatal and "key" in str(e.value)
        assert len(fake.requests) == 8  # the 529 and the 429 were retried by the SDK itself
        assert all("temperature" not in r for r in fake.requests)


# ----------------------------------------------------------------- prompts


def test_cache_breakpoint_sits_after_the_stable_prefix(tmp_path):
    with FakeAnthropic(default=lambda body: tool_reply({"plan": "a plan", "code": "print('program text here')"})) as fake:
        search, coder = _search(tmp_path, fake)
        coder.write(_request(search))
        parent = _node(3, code="import pandas as pd\nPARENT_MARKER = 1\n")
        coder.write(_request(search, Operator.IMPROVE, parent=parent))
    first, second = fake.requests
    for r in (first, second):
        assert len(r["system"]) == 1 and r["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert r["tool_choice"] == {"type": "tool", "name": "write_solution"}
    prefix = first["system"][0]["text"]
    assert prefix == second["system"][0]["text"]  # identical across operators: one cache entry
    assert "# Data profile" in prefix and '"n_train"' in prefix and "# Solution contract" in prefix
    assert search.task.metric in prefix and "# Knowledge entries" in prefix and "Source:" in prefix
    user = second["messages"][0]["content"]
    assert "PARENT_MARKER" in user and "# Solution contract" not in user and "# Data profile" not in user


def test_fusion_and_debug_prompts_carry_references_parent_code_and_error_tail(tmp_path):
    with FakeAnthropic(default=lambda body: tool_reply({"plan": "p", "code": "print('program text here')"})) as fake:
        search, coder = _search(tmp_path, fake, max_expert_calls=0)
        base = _node(5, code="BASE_CODE = 1\n", score=0.81)
        refs = (_node(7, code="REF_ONE = 1\n", score=0.83), _node(9, code="REF_TWO = 2\n", score=0.79))
        coder.write(_request(search, Operator.FUSION, parent=base, references=refs))
        crashed = _node(11, state=NodeState.BUGGY, code="CRASHING_CODE = 1\n", error="exit status 1", stderr_tail="Traceback ...\nKeyError: 'Cabin_deck'")
        coder.write(_request(search, Operator.DEBUG, parent=crashed))
    fusion, debug = (r["messages"][0]["content"] for r in fake.requests)
    assert "BASE_CODE" in fusion and "REF_ONE" in fusion and "REF_TWO" in fusion and "score 0.83" in fusion
    assert "CRASHING_CODE" in debug and "KeyError: 'Cabin_deck'" in debug


# ----------------------------------------------------------------- failure policy


def test_malformed_answers_are_reasked_then_the_recipe_coder_writes_the_node(tmp_path):
    script = [text_reply("I would use gradient boosting."), tool_reply({"plan": "p", "code": "def broken(:\n    pass"})]
    with FakeAnthropic(script) as fake:
        search, coder = _search(tmp_path, fake, max_reasks=1)
        ans = coder.write(_request(search))
    assert ans.config["author"].startswith("recipe (fallback: no valid answer after 2 attempt(s)")
    assert "does not parse" in ans.config["author"] and ans.config["model"] == "model.logistic_regression"
    calls = search.storage.llm_calls(search.run_id)
    assert [(c.kind, c.outcome) for c in calls] == [("code", "malformed"), ("reask", "malformed")]
    assert "could not be used" in fake.requests[1]["messages"][0]["content"]


def test_a_program_the_graph_already_has_is_reasked(tmp_path):
    failed = "import pandas as pd\n\ndf = pd.read_csv('input/train.csv')\nprint(df.Cabin_deck)\n"
    # the failed program back, with a comment and other spacing: still the same program
    again = "# fixed the column name\nimport pandas as pd\ndf = pd.read_csv( 'input/train.csv' )\n\nprint(df.Cabin_deck)\n"
    fixed = "import pandas as pd\n\ndf = pd.read_csv('input/train.csv')\nprint(df.Cabin)\n"
    assert program_key(again) == program_key(failed) != program_key(fixed)
    parent_config = {"author": CHEAP, "coder": "anthropic", "program": program_key(failed)}
    # the key names the program, not the model that wrote it or the plan it followed
    assert config_key(parent_config) == config_key({"program": program_key(failed), "author": STRONG, "expert_plan": "x"})
    parent = _node(4, state=NodeState.BUGGY, code=failed, config=parent_config, error="exit status 1", stderr_tail="AttributeError: Cabin_deck")
    tried = {config_key(parent_config): 4}
    with FakeAnthropic([tool_reply({"plan": "p", "code": again}), tool_reply({"plan": "p", "code": fixed})]) as fake:
        search, coder = _search(tmp_path, fake, max_reasks=1, max_expert_calls=0)
        ans = coder.write(_request(search, Operator.DEBUG, parent=parent, tried=tried))
    assert ans.code == fixed and ans.config["program"] == program_key(fixed)
    calls = search.storage.llm_calls(search.run_id)
    assert [(c.kind, c.outcome) for c in calls] == [("code", "repeat"), ("reask", "ok")]
    assert "node 4's program again" in fake.requests[1]["messages"][0]["content"]
    # when every answer repeats it, the recipe coder writes the node, as for malformed answers
    with FakeAnthropic(default=lambda body: tool_reply({"plan": "p", "code": again})) as fake:
        search, coder = _search(tmp_path / "b", fake, max_reasks=1, max_expert_calls=0)
        ans = coder.write(_request(search, Operator.DEBUG, parent=parent, tried=tried))
    assert ans.config["author"].startswith("recipe (fallback: no valid answer after 2 attempt(s)") and "node 4's program" in ans.config["author"]


def test_a_recipe_parent_given_back_unchanged_is_reasked(tmp_path):
    """A node the recipe coder wrote (a fallback) is keyed by its config, not its program, so
    `tried` cannot see it: the repeat check also compares the programs the prompt shows."""
    failed = "import pandas as pd\n\ndf = pd.read_csv('input/train.csv')\nprint(df.Cabin_deck)\n"
    again = "import pandas as pd\ndf = pd.read_csv('input/train.csv')  # unchanged\nprint(df.Cabin_deck)\n"
    fixed = "import pandas as pd\n\ndf = pd.read_csv('input/train.csv')\nprint(df.Cabin)\n"
    recipe_config = {"model": "model.lightgbm", "features": {}, "params": {"n_estimators": 300}}
    parent = _node(6, state=NodeState.BUGGY, code=failed, config=recipe_config, error="exit status 1")
    tried = {config_key(recipe_config): 6}
    assert config_key({"program": program_key(again)}) not in tried
    with FakeAnthropic([tool_reply({"plan": "p", "code": again}), tool_reply({"plan": "p", "code": fixed})]) as fake:
        search, coder = _search(tmp_path, fake, max_reasks=1, max_expert_calls=0)
        ans = coder.write(_request(search, Operator.DEBUG, parent=parent, tried=tried))
    assert ans.code == fixed
    assert [(c.kind, c.outcome) for c in search.storage.llm_calls(search.run_id)] == [("code", "repeat"), ("reask", "ok")]
    assert "node 6's program again" in fake.requests[1]["messages"][0]["content"]


def test_context_length_error_shrinks_the_prompt_once(tmp_path):
    script = [error_reply(400, "prompt is too long: 250000 tokens > 200000 maximum"), tool_reply({"plan": "p", "code": "print('program text here')"})]
    with FakeAnthropic(script) as fake:
        search, coder = _search(tmp_path, fake, max_expert_calls=0)
        refs = tuple(_node(i, code=f"REF_{i} = 1\n") for i in (7, 8, 9))
        ans = coder.write(_request(search, Operator.AGGREGATE, references=refs, reason="aggregate"))
    assert ans.config["author"] == CHEAP
    long, short = (r["messages"][0]["content"] for r in fake.requests[-2:])
    assert all(f"REF_{i}" in long for i in (7, 8, 9)) and "REF_7" in short and "REF_8" not in short


def test_an_outage_falls_back_per_node_and_a_bad_key_switches_the_llm_off(tmp_path):
    script = [error_reply(529, "overloaded")] * 3 + [error_reply(401, "invalid x-api-key")]
    with FakeAnthropic(script) as fake:
        search, coder = _search(tmp_path, fake, max_retries=2)
        a = coder.write(_request(search))  # 529 three times: SDK retries spent
        assert a.config["author"].startswith("recipe (fallback: the API kept failing (529)")
        b = coder.write(_request(search))  # 401: fatal
        c = coder.write(_request(search))  # no call any more
    assert "refused the key" in b.config["author"] and "refused the key" in c.config["author"]
    assert len(fake.requests) == 4


# ----------------------------------------------------------------- cascade


def test_cascade_escalates_after_n_failures_and_de_escalates_after_a_success(tmp_path):
    with FakeAnthropic(default=lambda body: tool_reply({"plan": "p", "code": "print('program text here')"})) as fake:
        search, coder = _search(tmp_path, fake, escalate_after=2)
        ok = _node(2)
        f1 = _node(3, state=NodeState.BUGGY, op=Operator.IMPROVE)
        f2 = _node(4, state=NodeState.TIMEOUT, op=Operator.DEBUG)
        fixed = _node(5, op=Operator.DEBUG)
        steps = [
            _request(search, Operator.DEBUG, parent=f1, lineage=(ok,)),  # one failure: cheap
            _request(search, Operator.DEBUG, parent=f2, lineage=(f1, ok)),  # two in a row: strong
            _request(search, Operator.IMPROVE, parent=fixed, lineage=(f2, f1, ok)),  # a success: cheap again
        ]
        assert [chain_failures(r) for r in steps] == [1, 2, 0]
        answers = [coder.write(r) for r in steps]
    assert [r["model"] for r in fake.requests] == [CHEAP, STRONG, CHEAP]
    assert [a.config["author"] for a in answers] == [CHEAP, STRONG, CHEAP]
    assert [c.model for c in search.storage.llm_calls(search.run_id)] == [CHEAP, STRONG, CHEAP]


def test_stagnation_asks_the_expert_for_a_plan_a_bounded_number_of_times(tmp_path):
    def reply(body):
        if body["tool_choice"]["name"] == "plan":
            return tool_reply({"plan": "EXPERT: keep LightGBM, add the fold-wise target encoding"})
        return tool_reply({"plan": "p", "code": "print('program text here')"})

    with FakeAnthropic(default=reply) as fake:
        search, coder = _search(tmp_path, fake, max_expert_calls=1)
        best = _node(4, code="BEST = 1\n")
        a = coder.write(_request(search, Operator.EVOLVE, parent=best, references=(_node(2),), reason="evolve: branch stagnant"))
        coder.write(_request(search, Operator.EVOLVE, parent=best, references=(_node(2),), reason="evolve: branch stagnant"))
    assert [(r["model"], r["tool_choice"]["name"]) for r in fake.requests] == [(STRONG, "plan"), (CHEAP, "write_solution"), (CHEAP, "write_solution")]
    assert "EXPERT: keep LightGBM" in fake.requests[1]["messages"][0]["content"]
    assert a.config["expert_plan"].startswith("EXPERT")


# ----------------------------------------------------------------- cost ledger and budget


def test_ledger_totals_equal_the_usage_the_api_reported(tmp_path):
    usages = [{"input_tokens": 1200, "output_tokens": 800, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 0},
              {"input_tokens": 300, "output_tokens": 650, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 3000}]
    script = [tool_reply({"plan": "p", "code": "print('program text here')"}, u) for u in usages]
    price = ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1)
    with FakeAnthropic(script) as fake:
        search, coder = _search(tmp_path, fake, prices={CHEAP: price})
        coder.write(_request(search))
        coder.write(_request(search))
    calls = search.storage.llm_calls(search.run_id)
    assert sum(c.input_tokens for c in calls) == 1500 and sum(c.output_tokens for c in calls) == 1450
    assert sum(c.cache_write_tokens for c in calls) == 3000 and sum(c.cache_read_tokens for c in calls) == 3000
    expected = (1500 * 1.0 + 1450 * 5.0 + 3000 * 1.25 + 3000 * 0.1) / 1e6
    assert search.storage.llm_spend_usd(search.run_id) == pytest.approx(expected)
    assert [c.request_id for c in calls] == ["req_fake_0001", "req_fake_0002"]


def test_budget_stops_new_calls_before_it_is_exceeded_and_resume_keeps_the_spend(tmp_path):
    # each call bills 500 output tokens at $20 / MTok = $0.01; the worst case of a call is
    # max_tokens=1000 of output = $0.02 (prompt tokens are free in this price table)
    price = ModelPrice(input=0, output=20.0, cache_write=0, cache_read=0)
    ok = lambda body: tool_reply({"plan": "p", "code": "print('program text here')"})  # noqa: E731
    with FakeAnthropic(default=ok) as fake:
        search, coder = _search(tmp_path, fake, prices={CHEAP: price, STRONG: price}, max_cost_usd=0.035)
        answers = [coder.write(_request(search)) for _ in range(4)]
        assert len(fake.requests) == 2  # 0 + 0.02 and 0.01 + 0.02 fit; 0.02 + 0.02 > 0.035 does not
        assert search.storage.llm_spend_usd(search.run_id) == pytest.approx(0.02)
        assert [a.config["author"].split(" ")[0] for a in answers] == [CHEAP, CHEAP, "recipe", "recipe"]
        assert "budget of $0.04 reached" in answers[2].config["author"] or "budget of $0.03" in answers[2].config["author"]
        search.storage.close()
        settings = _settings(fake, prices={CHEAP: price, STRONG: price}, max_cost_usd=0.035, on_budget_spent="stop")
        coder2 = AnthropicCoder(settings, fallback=RecipeCoder(models=FAST), client=AnthropicClient(settings.llm, api_key="test-key"))
        resumed = open_search(tmp_path / "run", coder=coder2)
        assert coder2.spent_usd() == pytest.approx(0.02)
        with pytest.raises(CoderStop, match="budget"):
            coder2.write(_request(resumed))
        assert len(fake.requests) == 2


def test_recipe_fallback_replaces_an_llm_parent_it_cannot_read_by_a_draft(tmp_path):
    with FakeAnthropic([error_reply(401, "invalid x-api-key")]) as fake:
        search, coder = _search(tmp_path, fake)
        llm_parent = _node(3, config={"author": CHEAP, "coder": "anthropic"})
        ans = coder.write(_request(search, Operator.IMPROVE, parent=llm_parent))
    assert ans.config["author"].startswith("recipe (fallback") and ans.config["model"] == "model.logistic_regression"


def test_settings_reject_unknown_llm_fields_and_price_unknown_models_high():
    with pytest.raises(Exception, match="extra"):
        LLMSettings(temperature=0.5)
    with pytest.raises(Exception, match="21000"):
        LLMSettings(max_tokens=32000)  # the SDK would demand streaming
    s = LLMSettings()
    assert s.price("some-future-model").output == max(p.output for p in s.prices.values())
    assert dataclasses.is_dataclass(CoderRequest)


def _review_search(tmp_path, fake, code_holder, **llm):
    search, coder = _search(tmp_path, fake, **{"model_review": True, **llm})
    code_holder["valid"] = _valid_code(search)
    # a planted leak the static review cannot see: the scaler is fitted on the training and test rows together
    code_holder["leaky"] = code_holder["valid"].replace("import numpy as np", "import numpy as np\nLEAK = 'StandardScaler().fit(pd.concat([train, test]))'", 1)
    assert code_holder["leaky"] != code_holder["valid"]
    search.settings = search.settings.model_copy(update={"max_nodes": 1})
    return search


def test_the_code_review_operator_revises_a_leaky_program_and_the_revision_runs(tmp_path):
    """On by default for programs a model wrote: the cheap model reads the program and answers
    with the problems and a revised program, which passes the static review and runs instead;
    the verdict, the problems, the diff and the review's ledger rows are the node's."""
    code_holder, reviewed = {}, []

    def reply(body):
        if body["tool_choice"]["name"] == "review":
            reviewed.append(body["messages"][0]["content"])
            return tool_reply({"verdict": "revise", "problems": ["the scaler is fitted on the training and test rows together (leakage)"],
                               "revised_code": code_holder["valid"]})
        return tool_reply({"plan": "p", "code": code_holder["leaky"]})

    with FakeAnthropic(default=reply) as fake:
        search = _review_search(tmp_path, fake, code_holder)
        search.step()
    node = next(n for n in search.nodes() if n.parent_id is not None)
    assert "LEAK = " in reviewed[0] and "leakage" in reviewed[0]  # the program and the review's brief reached the model
    assert node.state is NodeState.VALID and node.code == code_holder["valid"]  # the revision ran
    assert node.review["verdict"] == "fixed" and node.review["model_review"]["verdict"] == "revise"
    assert "leakage" in node.review["model_review"]["problems"][0] and "-LEAK = " in node.review["model_review"]["diff"]
    calls = search.storage.llm_calls(search.run_id)
    assert [(c.kind, c.node_seq) for c in calls] == [("code", node.seq), ("review", node.seq)] and all(c.cost_usd > 0 for c in calls)
    import mcgs
    from mcgs.report import render_report
    from mcgs.status_view import spend_view

    snap = mcgs.load_run(tmp_path / "run", details=True)
    assert "code review by the model: 1 revised (the revision ran)" in " ".join(str(x) for x in spend_view(snap))
    assert '"model_review": {"verdict": "revise"' in render_report(snap)


def test_a_review_malformed_twice_lets_the_program_run_on_the_static_review(tmp_path):
    code_holder = {}

    def reply(body):
        if body["tool_choice"]["name"] == "review":
            return tool_reply({"verdict": "revise", "problems": ["something"]})  # no revised program: malformed
        return tool_reply({"plan": "p", "code": code_holder["valid"]})

    with FakeAnthropic(default=reply) as fake:
        search = _review_search(tmp_path, fake, code_holder, max_reasks=1)
        search.step()
    node = next(n for n in search.nodes() if n.parent_id is not None)
    assert node.state is NodeState.VALID and node.code == code_holder["valid"]
    assert node.review["verdict"] == "passed" and node.review["model_review"]["verdict"] == "unavailable"
    assert [(c.kind, c.outcome) for c in search.storage.llm_calls(search.run_id)] == [("code", "ok"), ("review", "malformed"), ("review", "malformed")]


def test_a_revision_the_static_review_refuses_rejects_the_node_and_recipe_programs_are_not_reviewed(tmp_path):
    code_holder = {}

    def reply(body):
        if body["tool_choice"]["name"] == "review":
            return tool_reply({"verdict": "revise", "problems": ["p"], "revised_code": "import subprocess\nsubprocess.run(['ls'])\n" + code_holder["valid"]})
        return tool_reply({"plan": "p", "code": code_holder["valid"]})

    with FakeAnthropic(default=reply) as fake:
        search = _review_search(tmp_path, fake, code_holder)
        search.step()
    node = next(n for n in search.nodes() if n.parent_id is not None)
    assert node.state is NodeState.REJECTED and any(r.startswith("revised program:") for r in node.review["reasons"])
    with FakeAnthropic(default=reply) as fake:  # the model review off: nothing but the static review
        search = _review_search(tmp_path / "off", fake, code_holder, model_review=False)
        search.step()
    assert [c.kind for c in search.storage.llm_calls(search.run_id)] == ["code"]
    with FakeAnthropic([error_reply(401, "bad key")]) as fake:  # the LLM off: the recipe coder's program is not reviewed
        search = _review_search(tmp_path / "recipe", fake, code_holder)
        search.step()
    node = next(n for n in search.nodes() if n.parent_id is not None)
    assert node.config["author"].startswith("recipe") and "model_review" not in node.review


# ----------------------------------------------------------------- request -> task spec


def _request_folder(tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 120
    train = pd.DataFrame({"rid": range(n), "hour": rng.integers(0, 24, n), "temp": rng.normal(20, 5, n), "rentals": rng.poisson(30, n)})
    test = pd.DataFrame({"rid": range(n, n + 40), "hour": rng.integers(0, 24, 40), "temp": rng.normal(20, 5, 40)})
    d = tmp_path / "data"
    d.mkdir()
    train.to_csv(d / "train.csv", index=False)
    test.to_csv(d / "test.csv", index=False)
    return d


def test_the_model_reads_a_request_the_rules_cannot_and_the_data_checks_still_apply(tmp_path):
    from mcgs.request import RequestReader, parse_request

    data = _request_folder(tmp_path)
    prompt = "How many bikes will people take? Score it on the squared error of the logged counts, and keep it explainable to our board."
    assert not parse_request(prompt, data).ok  # the rules find no metric in these words
    reading = {"metric": "rmsle", "target": ["rentals"], "interpretable": True}
    with FakeAnthropic([tool_reply(reading)]) as fake:
        s = LLMSettings(base_url=fake.base_url, cheap_model=CHEAP)
        reader = RequestReader(s, AnthropicClient(s, api_key="test-key"))
        parsed = parse_request(prompt, data, reader=reader)
    assert parsed.ok, parsed.problems
    r = parsed.request
    assert (r.metric, r.target, r.task_kind, r.constraints.interpretable) == ("rmsle", ["rentals"], "regression", True)
    assert any("read from the request by the model" in n for n in parsed.notes)
    sent = fake.requests[0]
    assert sent["tool_choice"]["name"] == "task_spec" and "rentals" in sent["messages"][0]["content"]
    assert reader.usage.output_tokens == 500

    # the model names an input column as the target: the data check reports it
    with FakeAnthropic([tool_reply({"metric": "rmse", "target": ["temp"]})]) as fake:
        s = LLMSettings(base_url=fake.base_url, cheap_model=CHEAP)
        parsed = parse_request("Predict it; score by squared error of the logs please.", data, reader=RequestReader(s, AnthropicClient(s, api_key="k")))
    assert any(p.field == "target" and "'temp'" in p.message for p in parsed.problems)

    # the API is down: the rules alone read the request, and say so
    with FakeAnthropic([error_reply(401, "invalid x-api-key")]) as fake:
        s = LLMSettings(base_url=fake.base_url, cheap_model=CHEAP)
        parsed = parse_request(prompt, data, reader=RequestReader(s, AnthropicClient(s, api_key="k")))
    assert not parsed.ok and any("rules alone" in n for n in parsed.notes)


# ----------------------------------------------------------------- ledger defects (issue 31, section 6)


def test_failed_calls_keep_their_latency_and_request_id(tmp_path):
    script = [error_reply(500, "boom")] * 3 + [error_reply(400, "prompt is too long: 210000 tokens > 200000 maximum")] * 2
    with FakeAnthropic(script) as fake:
        search, coder = _search(tmp_path, fake)
        coder.write(_request(search))  # 500 after the SDK's two retries: the recipe coder writes the node
        coder.write(_request(search))  # too long, then too long when shrunk
    calls = search.storage.llm_calls(search.run_id)
    assert [c.outcome for c in calls] == ["error", "error", "error"], calls
    assert [c.request_id for c in calls] == ["req_fake_0003", "req_fake_0004", "req_fake_0005"]
    assert all(c.latency_s > 0 and c.cost_usd == 0 and c.input_tokens == 0 for c in calls)


def test_a_sub_cent_budget_prints_as_what_it_is_and_a_refused_call_is_no_call(tmp_path):
    from rich.console import Console

    from mcgs.status_view import spend_view

    price = ModelPrice(input=0, output=20.0, cache_write=0, cache_read=0)
    with FakeAnthropic(default=lambda body: tool_reply({"plan": "p", "code": "print('program text here')"})) as fake:
        search, coder = _search(tmp_path, fake, prices={CHEAP: price, STRONG: price}, max_cost_usd=0.0001)
        ans = coder.write(_request(search))
        assert len(fake.requests) == 0
    assert "LLM budget of $0.0001 reached (spent $0;" in ans.config["author"], ans.config["author"]
    calls = search.storage.llm_calls(search.run_id)
    assert [c.outcome for c in calls] == ["budget"]
    console = Console(width=200, record=True)
    for part in spend_view(search.snapshot()):
        console.print(part)
    text = console.export_text()
    total = next(line for line in text.splitlines() if line.strip("│ ").startswith("total"))
    assert [c.strip() for c in total.split("│")][3] == "0", text  # calls made: none (it counted the refused one)
    assert "LLM budget: $0 of $0.0001; 1 call(s) not made because the budget could not cover them" in text, text


def test_screening_calls_are_labelled_with_the_node_their_plan_became(tmp_path):
    task = make_task(tmp_path / "t", "binary")
    with FakeAnthropic() as fake:
        settings = _settings(fake).model_copy(update={"plan_candidates": 2, "max_nodes": 2, "screen_share": 0.5})
        program = RecipeCoder(models=FAST).write(CoderRequest(operator=Operator.DRAFT, task=task, profile=profile_task(task))).code
        from fake_anthropic import distinct_programs

        fake.default = distinct_programs(program, "logistic regression")
        coder = AnthropicCoder(settings, fallback=RecipeCoder(models=FAST), client=AnthropicClient(settings.llm, api_key="test-key"))
        search = create_search(task, tmp_path / "run", settings=settings, coder=coder)
        search.run()
    drafts = {n.seq: n for n in search.nodes() if n.operator is Operator.DRAFT}
    calls = search.storage.llm_calls(search.run_id)
    assert len(drafts) == 2 and len(calls) == 2, calls
    assert sorted(c.node_seq for c in calls) == sorted(drafts), calls  # was None for both


def test_debug_prompts_show_the_traceback_once_and_no_host_paths(tmp_path):
    import sys

    with FakeAnthropic(default=lambda body: tool_reply({"plan": "p", "code": "print('program text here')"})) as fake:
        search, coder = _search(tmp_path, fake)
        ws = search.run_dir / "nodes" / "00011"
        tb = (f'Traceback (most recent call last):\n  File "{ws}/solution.py", line 40, in <module>\n'
              f'  File "{sys.prefix}/lib/python3.11/site-packages/pandas/core/frame.py", line 4090, in __getitem__\n'
              f"KeyError: 'Cabin_deck'")
        crashed = _node(11, state=NodeState.BUGGY, code="CRASHING_CODE = 1\n", error=f"KeyError: 'Cabin_deck'\n{tb}", stderr_tail=tb)
        coder.write(_request(search, Operator.DEBUG, parent=crashed))
    prompt = fake.requests[0]["messages"][0]["content"]
    assert prompt.count("Traceback (most recent call last)") == 1, prompt
    assert str(search.run_dir) not in prompt and sys.prefix not in prompt
    assert 'File "solution.py", line 40' in prompt and "<python>/lib/python3.11/site-packages/pandas" in prompt


def test_the_recipe_coder_taking_over_an_llm_parent_does_not_repeat_a_fallback_draft(tmp_path):
    """Drafts written by the recipe coder as the LLM's fallback carry an author; an Improve of an
    LLM parent that the recipe coder takes over writes a fresh draft, which must not be one of
    those drafts again with only another seed."""
    with FakeAnthropic([error_reply(401, "invalid x-api-key")]) as fake:
        search, coder = _search(tmp_path, fake)
        first = coder.write(_request(search))  # the fallback's draft (logistic regression, defaults)
        assert first.config["author"].startswith("recipe (fallback")
        drafted = _node(1, config=first.config, code=first.code)
        tried = {config_key(first.config): 1}
        llm_parent = _node(3, config={"author": CHEAP, "coder": "anthropic", "program": "abc"})
        ans = coder.write(_request(search, Operator.IMPROVE, parent=llm_parent, siblings=(), tried=tried))
    assert config_key(ans.config) != config_key(drafted.config), ans.config
