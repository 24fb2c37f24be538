"""The simulated coder (mcgs/coders/simulated.py): the recipe coder's programs with LLM-like
faults, each of which the engine must see as what it is (a rejection, a crash, an invalid output,
a timeout, an inflated valid score); Debug repairs what it broke at its repair rate; its Code
Review catches faults at its review rate; and a search at a 40 % fault rate still hands in a
valid submission."""

from __future__ import annotations

import dataclasses

import pytest

from mcgs.coders import CoderRequest
from mcgs.coders.simulated import FAULTS, SimulatedCoder, inject_fault, remove_fault
from mcgs.node import NodeState, Operator
from mcgs.profile import profile_task
from mcgs.search import create_search
from mcgs.settings import SearchSettings
from recipe_runs import make_task

FAST = ("model.logistic_regression",)


def _search(tmp_path, coder, **settings):
    task = make_task(tmp_path / "t", "binary")
    base = dict(time_budget_s=300, max_nodes=1, seed=0, policy="greedy", ensemble=False, plan_candidates=0, cpu_threads=1)
    return create_search(task, tmp_path / "run", settings=SearchSettings(**(base | settings)), coder=coder)


@pytest.mark.parametrize("fault, state, says", [
    ("syntax_error", NodeState.REJECTED, "does not parse"),
    ("wrong_column", NodeState.BUGGY, "KeyError"),
    ("shape_mismatch", NodeState.INVALID_OUTPUT, "oof"),
    ("missing_submission", NodeState.INVALID_OUTPUT, "submission"),
    ("timeout", NodeState.TIMEOUT, ""),
])
def test_each_fault_reaches_the_engine_as_what_it_is(tmp_path, fault, state, says):
    coder = SimulatedCoder(fault_rate=1.0, faults=(fault,), models=FAST)
    search = _search(tmp_path, coder, per_run_timeout_s=8)
    search.run()
    node = next(n for n in search.nodes() if n.parent_id is not None)
    assert node.config["simulated_fault"] == fault and node.config["coder"] == "simulated"
    assert node.state is state, (node.state, node.error)
    text = " ".join([node.error or "", node.stderr_tail or "", " ".join(node.review.get("reasons", []))])
    assert says.lower() in text.lower(), text[-500:]


def test_a_leak_inflates_the_validation_score(tmp_path):
    clean = _search(tmp_path / "clean", SimulatedCoder(fault_rate=0.0, models=FAST))
    clean.run()
    leaky = _search(tmp_path / "leak", SimulatedCoder(fault_rate=1.0, faults=("leak",), models=FAST))
    leaky.run()
    a, b = (next(n for n in s.nodes() if n.parent_id is not None) for s in (clean, leaky))
    assert a.state is b.state is NodeState.VALID and b.config["simulated_fault"] == "leak"
    assert b.score > a.score + 0.05  # accuracy: the true labels pulled into the OOF predictions


def test_debug_repairs_what_it_broke_at_its_repair_rate(tmp_path):
    spec = make_task(tmp_path / "t", "binary")
    profile = profile_task(spec)
    draft = SimulatedCoder(fault_rate=1.0, faults=("wrong_column",), models=FAST).write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=profile))
    from mcgs.node import FrozenNode

    parent = FrozenNode(id=5, seq=5, parent_id=0, operator=Operator.DRAFT, state=NodeState.BUGGY, score=None, code=draft.code,
                        config=draft.config, error="exit status 1: KeyError: 'targets'")
    debug = CoderRequest(operator=Operator.DEBUG, task=spec, profile=profile, parent=parent, node_seq=6)
    fixed = SimulatedCoder(repair_rate=1.0, models=FAST).write(debug)
    assert fixed.config["repaired"] == "wrong_column" and "simulated_fault" not in fixed.config
    assert "_sim_" in draft.code and "_sim_" not in fixed.code and remove_fault(draft.code)[1] == "wrong_column"
    assert fixed.config["model"] == draft.config["model"] and fixed.config["params"] == draft.config["params"]
    failed = SimulatedCoder(repair_rate=0.0, models=FAST).write(debug)
    assert failed.config["simulated_fault"] in FAULTS and "fix of the wrong column failed" in failed.plan
    with pytest.raises(ValueError, match="not a probability"):
        SimulatedCoder(fault_rate=1.5)
    with pytest.raises(ValueError, match="unknown fault"):
        inject_fault("import os\n", "gremlins")


def test_its_code_review_catches_faults_and_the_revision_runs(tmp_path):
    coder = SimulatedCoder(fault_rate=1.0, faults=("leak",), review_rate=1.0, models=FAST)
    search = _search(tmp_path, coder)
    search.run()
    node = next(n for n in search.nodes() if n.parent_id is not None)
    assert node.state is NodeState.VALID and "_sim_" not in node.code
    assert node.review["verdict"] == "fixed" and node.review["model_review"]["verdict"] == "revise"
    assert node.review["model_review"]["problems"] == ["leak: fixed"]


@pytest.mark.slow
def test_a_search_at_a_forty_percent_fault_rate_hands_in_a_valid_submission(tmp_path):
    coder = SimulatedCoder(seed=1, fault_rate=0.4, repair_rate=0.7, models=FAST)
    search = _search(tmp_path, coder, max_nodes=10, per_run_timeout_s=20, policy="mcgs", ensemble=True)
    final = search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None and n.operator is not Operator.ENSEMBLE]
    faulted = [n for n in nodes if n.config.get("simulated_fault")]
    assert faulted and any(not n.is_valid for n in faulted)  # faults happened and failed nodes
    assert final is not None and final.is_valid and (tmp_path / "run" / "best" / "submission.csv").is_file()
    assert all(n.config.get("coder") == "simulated" for n in nodes)


class _FailingCoder:
    """Writes the recipe coder's program with a crash at its end: every node fails after running."""

    name = "failing"

    def __init__(self):
        from mcgs.coders.recipe import RecipeCoder

        self.recipe = RecipeCoder(seed=0, models=FAST)

    def write(self, request):
        answer = self.recipe.write(request)
        return dataclasses.replace(answer, code=answer.code + "\nraise RuntimeError('broken on purpose')\n",
                                   config={**answer.config, "coder": self.name})


@pytest.mark.slow
@pytest.mark.parametrize("rescue_at", [0.5, 1.0])
def test_a_run_whose_coder_only_fails_is_rescued_by_the_recipe_coders_cheapest_program(tmp_path, rescue_at):
    search = _search(tmp_path, _FailingCoder(), time_budget_s=40, max_nodes=40, per_run_timeout_s=15, policy="mcgs", rescue_at=rescue_at)
    final = search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    rescues = [n for n in nodes if n.config.get("rescue")]
    if rescue_at >= 1:  # turned off: the run ends with nothing to hand in
        assert not rescues and final is None and all(n.state is NodeState.BUGGY for n in nodes)
        return
    first = nodes.index(rescues[0])
    assert first > 0 and all(n.state is NodeState.BUGGY for n in nodes[:first])  # the coder's nodes came first, and failed
    assert rescues[0].operator is Operator.DRAFT and rescues[0].plan.startswith("[rescue] Rescue draft")
    assert rescues[0].config.get("coder") is None and "broken on purpose" not in rescues[0].code  # the recipe coder's own program
    assert final is not None and final.is_valid and (tmp_path / "run" / "best" / "submission.csv").is_file()
    assert len(rescues) == 1  # a valid rescue ends the rescuing


def test_mcgs_run_takes_the_simulated_coder_from_its_settings(tmp_path):
    from mcgs.search import _default_coder

    coder = _default_coder(SearchSettings(coder="simulated", simulated_fault_rate=0.4, simulated_repair_rate=0.5, simulated_review_rate=0.3))
    assert isinstance(coder, SimulatedCoder) and (coder.fault_rate, coder.repair_rate, coder.review_rate) == (0.4, 0.5, 0.3)
    assert dataclasses.is_dataclass(CoderRequest)
