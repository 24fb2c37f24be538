"""End-to-end search on the demo task (scikit-learn's breast-cancer data): nodes persisted,
engine scoring, Debug of a broken program, and resume after interruptions."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pandas as pd

import pytest

from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.evaluation import score_predictions
from mcgs.node import NodeState, Operator
from mcgs.search import RunError, create_search, open_search
from mcgs.settings import SearchSettings

FAST = ("model.logistic_regression", "model.lightgbm")


@pytest.fixture(scope="module")
def demo_task(tmp_path_factory):
    return build_demo_task(tmp_path_factory.mktemp("demo") / "task")


def settings(**kw) -> SearchSettings:
    # the tree policy keeps these persistence tests' node sequence simple; test_graph_search
    # covers the graph operators
    base = dict(time_budget_s=600, per_run_timeout_s=120, num_drafts=2, max_nodes=5, seed=0, ensemble=False, policy="tree")
    base.update(kw)
    return SearchSettings(**base)


class Wrapped:
    """A coder that edits the recipe coder's programs (to inject bugs or misleading prints)."""

    name = "wrapped"

    def __init__(self, edit, inner=None):
        self.inner = inner or RecipeCoder(models=FAST)
        self.edit = edit
        self.calls = 0

    def write(self, request: CoderRequest) -> CoderAnswer:
        self.calls += 1
        ans = self.inner.write(request)
        return dataclasses.replace(ans, code=self.edit(self.calls, request, ans.code))


def test_search_persists_nodes_and_scores_them_itself(demo_task, tmp_path):
    """The candidate prints a fake score in the opposite direction; the engine ignores it."""
    liar = Wrapped(lambda n, req, code: code + "\nprint('validation roc_auc: 0.01 (lower is better)')\n")
    search = create_search(demo_task, tmp_path / "run", settings=settings(ensemble=True), coder=liar)
    final = search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    singles = [n for n in nodes if n.operator is not Operator.ENSEMBLE]
    assert len(singles) == 5 and all(n.state is NodeState.VALID for n in singles)
    assert [n.operator for n in singles[:2]] == [Operator.DRAFT, Operator.DRAFT]
    assert all(n.operator is Operator.IMPROVE for n in singles[2:])
    assert search.task.higher_is_better is True
    # the stored score is the metric of oof.csv against the labels, not what the program printed
    for n in singles:
        assert "lower is better" in n.stdout_tail
        oof = pd.read_csv(search.node_dir(n) / "working" / "oof.csv").sort_values("row")
        y = pd.read_csv(search.task.train_path)["diagnosis"].to_numpy()[oof["row"]]
        assert n.score == pytest.approx(score_predictions(search.task, y, oof[["diagnosis"]].to_numpy()))
        assert 0.9 < n.score <= 1.0
    # rewards: the first node is a new best (2.0); all rewards within [0, 2]
    assert singles[0].reward == 2.0 and all(0 <= n.reward <= 2 for n in singles)
    # the final ensemble is a node like any other, joined to its members by `ensembles` edges
    ens = nodes[-1]
    assert ens.operator is Operator.ENSEMBLE and ens.state is NodeState.VALID
    members = [e.src for e in search.storage.get_edges(search.run_id) if e.kind.value == "ensembles"]
    assert len(members) >= 2 and set(members) <= {n.id for n in singles}
    best_single = max(singles, key=lambda n: n.score)
    assert final.id in (ens.id, best_single.id)
    if ens.score >= best_single.score:
        assert final.id == ens.id
    sub = pd.read_csv(tmp_path / "run" / "best" / "submission.csv")
    assert len(sub) == search.task.n_test and sub["diagnosis"].between(0, 1).all()
    # best/ is self-contained: its program re-creates the submission from that folder
    best = tmp_path / "run" / "best"
    assert json.loads((best / "node.json").read_text())["node"] == final.seq
    r = subprocess.run([sys.executable, "solution.py"], cwd=best, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    again_sub = pd.read_csv(best / "submission" / "submission.csv")
    assert np.allclose(again_sub["diagnosis"], sub["diagnosis"]) and (again_sub["id"] == sub["id"]).all()
    # the graph is rebuilt from storage alone, in a new process-like session
    again = open_search(tmp_path / "run")
    g = again.graph()
    assert g.number_of_nodes() == 7 and g.number_of_edges() == 6 + len(set(members))
    assert again.final_node.id == final.id
    assert again.run_record.package_versions["scikit-learn"]
    assert len(again.run_record.data_fingerprint) == 64
    # resumed with nothing left to search (node budget spent): no second final ensemble
    assert again.run().id == final.id and len(again.nodes()) == 7


def test_buggy_program_gets_a_debug_child(demo_task, tmp_path):
    def break_first(n, req, code):
        return code.replace('TASK = json.load(open("input/task.json"))', 'TASK = json.load(open("input/task.json"))\nraise KeyError("no_such_column")') if n == 1 else code

    search = create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=3, num_drafts=1), coder=Wrapped(break_first))
    search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    first = nodes[0]
    assert first.state is NodeState.BUGGY and first.reward == -1.0
    assert "KeyError: 'no_such_column'" in first.error
    debug = [n for n in nodes if n.operator is Operator.DEBUG]
    assert len(debug) == 1 and debug[0].parent_id == first.id
    assert debug[0].state is NodeState.VALID
    assert not (search.node_dir(first) / "working").exists()  # failed nodes' scratch is removed


def test_invalid_output_is_recorded_with_its_reason(demo_task, tmp_path):
    def drop_rows(n, req, code):
        return code.replace("oof_df.to_csv(", "oof_df.iloc[5:].to_csv(") if n == 1 else code

    search = create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=1), coder=Wrapped(drop_rows))
    search.run()
    node = search.nodes()[1]
    assert node.state is NodeState.INVALID_OUTPUT
    assert "working/oof.csv: missing rows" in node.error


class Interrupting:
    """Raises KeyboardInterrupt (as Ctrl-C would) when asked for its n-th program."""

    name = "interrupting"

    def __init__(self, at: int):
        self.inner = RecipeCoder(models=FAST)
        self.at = at
        self.calls = 0

    def write(self, request):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.inner.write(request)


def test_resume_after_interrupt_keeps_finished_nodes(demo_task, tmp_path):
    run = tmp_path / "run"
    search = create_search(demo_task, run, settings=settings(max_nodes=6), coder=Interrupting(at=4))
    with pytest.raises(KeyboardInterrupt):
        search.run()
    before = [n for n in search.nodes() if n.parent_id is not None]
    assert len(before) == 3 and search.storage.get_run(search.run_record.name).status == "stopped"
    elapsed = search.storage.get_run(search.run_record.name).elapsed_s
    assert elapsed > 0

    resumed = open_search(run, coder=RecipeCoder(models=FAST))
    assert resumed.clock.elapsed_before == pytest.approx(elapsed)
    resumed.run()
    after = [n for n in resumed.nodes() if n.parent_id is not None]
    assert len(after) == 6
    for old, new in zip(before, after[:3]):
        assert (old.id, old.code, old.score, old.reward, old.state) == (new.id, new.code, new.score, new.reward, new.state)
    assert resumed.storage.get_run(resumed.run_record.name).status == "finished"


def test_resume_after_a_hard_kill_reruns_the_running_candidate_once(demo_task, tmp_path):
    """DESIGN §7 / issue 8: a node whose worker is gone is queued again and rerun (its program
    kept, no new selection), up to ``max_attempts`` claims; past that it is INTERRUPTED."""
    import socket

    run = tmp_path / "run"
    search = create_search(demo_task, run, settings=settings(max_nodes=2), coder=RecipeCoder(models=FAST))
    search.run()
    good = next(n for n in search.nodes() if n.is_valid)
    # as if an engine had been SIGKILLed while two candidates ran: nodes left RUNNING, held by a
    # process of this host that no longer exists (pid 4194304 is above Linux's pid limit)
    dead = f"{socket.gethostname()}:4194304:1"
    root = search.nodes()[0]
    retried = search.storage.add_node(search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="lost once", code=good.code, owner=dead)
    search.storage.set_running(retried.id, "nodes/lost")
    spent = search.storage.add_node(search.run_id, parent_id=root.id, operator=Operator.DRAFT, plan="lost twice", code=good.code, owner=dead)
    search.storage.set_running(spent.id, "nodes/lost2")
    con = sqlite3.connect(run / "mcgs.db")
    con.execute("update nodes set attempts = 2 where id = ?", (spent.id,))
    con.commit()
    con.close()
    resumed = open_search(run, coder=RecipeCoder(models=FAST))
    resumed.settings = resumed.settings.model_copy(update={"max_nodes": 3})  # interrupted nodes do not count
    resumed.run()
    by_id = {n.id: n for n in resumed.nodes()}
    assert by_id[retried.id].state is NodeState.VALID and by_id[retried.id].attempts == 2
    assert by_id[retried.id].score == pytest.approx(good.score) and by_id[retried.id].owner == resumed.owner
    assert by_id[spent.id].state is NodeState.INTERRUPTED and "attempt 2 of 2" in by_id[spent.id].error
    searched = [n for n in by_id.values() if n.operator is not Operator.ENSEMBLE]
    assert len(searched) == 5 and sum(n.is_valid for n in searched) == 3  # 2 + the rerun one: nothing new selected


def test_run_dir_conflicts_and_missing_runs_are_clear_errors(demo_task, tmp_path):
    create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=1))
    with pytest.raises(RunError, match="already holds a run"):
        create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=1))
    with pytest.raises(RunError, match="holds no mcgs run"):
        open_search(tmp_path / "nothing")


def test_changed_task_data_is_refused_on_resume(demo_task, tmp_path):
    import shutil

    task = tmp_path / "task"
    shutil.copytree(demo_task, task)
    create_search(task, tmp_path / "run", settings=settings(max_nodes=1))
    train = pd.read_csv(task / "train.csv")
    train.iloc[:-1].to_csv(task / "train.csv", index=False)
    with pytest.raises(RunError, match="changed since the run started"):
        open_search(tmp_path / "run")


def test_demo_answers_never_reach_the_workspace(demo_task, tmp_path):
    search = create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=1), coder=RecipeCoder(models=FAST))
    search.run()
    files = {p.name for p in (tmp_path / "run" / "input").iterdir()}
    assert files == {"train.csv", "test.csv", "sample_submission.csv", "task.json", "folds.csv"}
    assert np.all([not (p.stat().st_mode & 0o222) for p in (tmp_path / "run" / "input").iterdir()])


def test_request_stop_interrupts_even_if_keyboardinterrupt_is_lost(demo_task, tmp_path):
    """A Ctrl-C swallowed by Python (e.g. inside an at-fork hook) still stops the run: the
    signal handler also sets the stop flag, which the sandbox and the loop both check."""
    holder = {}

    class StopsOnSecond(RecipeCoder):
        def write(self, request):
            if request.seed % 100_003 == 2:
                holder["search"].request_stop()
            return super().write(request)

    search = create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=4), coder=StopsOnSecond(models=FAST))
    holder["search"] = search
    with pytest.raises(KeyboardInterrupt):
        search.run()
    states = [n.state for n in search.nodes() if n.parent_id is not None]
    assert states == [NodeState.VALID, NodeState.INTERRUPTED]
    assert search.storage.get_run(search.run_record.name).status == "stopped"


def test_a_candidate_is_limited_to_its_share_of_the_budget(demo_task, tmp_path):
    """``node_timeout_share`` bounds one candidate below ``per_run_timeout_s``: a program that
    sleeps past it times out (a verdict: the node failed), not 'interrupted'."""
    sleeper = Wrapped(lambda n, req, code: "import time\ntime.sleep(60)\n" + code if n == 1 else code)
    s = settings(time_budget_s=40, per_run_timeout_s=120, node_timeout_share=0.1, max_nodes=1, num_drafts=1)
    assert s.node_limit_s == pytest.approx(4.0)
    search = create_search(demo_task, tmp_path / "run", settings=s, coder=sleeper)
    search.run()
    draft = next(n for n in search.nodes() if n.operator is Operator.DRAFT)
    assert draft.state is NodeState.TIMEOUT, (draft.state, draft.error)
    assert draft.runtime_s < 15


def test_a_baseline_program_is_the_first_node_and_the_search_builds_from_it(demo_task, tmp_path):
    """MLAgentBench mode: the starter program runs first as a scored root-level node; the
    recipe coder cannot edit a program it did not write, so its expansions draft afresh."""
    from mcgs.coders import CoderRequest
    from mcgs.profile import profile_task
    from mcgs.task import load_task

    spec = load_task(demo_task)
    code = RecipeCoder(models=("model.logistic_regression",)).write(CoderRequest(operator=Operator.DRAFT, task=spec, profile=profile_task(spec))).code
    script = tmp_path / "starter.py"
    script.write_text(code.replace("mcgs candidate", "starter program"))
    search = create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=4, num_drafts=2), coder=RecipeCoder(models=FAST), baseline=script)
    search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    first = nodes[0]
    assert first.config == {"baseline": True, "author": "baseline"} and first.is_valid and "starter program" in first.code
    assert len([n for n in nodes if n.operator is Operator.DRAFT]) == 2  # the baseline counts as a draft
    improve = RecipeCoder(models=FAST).write(CoderRequest(operator=Operator.IMPROVE, task=spec, profile=search.profile, parent=first))
    assert "was not written by the recipe coder" in improve.plan and improve.config["change"] == "draft"
    with pytest.raises(RunError, match="does not exist"):
        create_search(demo_task, tmp_path / "run2", settings=settings(), baseline=tmp_path / "missing.py")


def test_a_run_pauses_below_the_free_space_floor_and_continues_when_it_is_lowered(demo_task, tmp_path):
    """The floor above the disk's free space pauses the run (status paused, a message, no
    budget charged); `mcgs set RUN_DIR min_free_disk_mb=0` lets it continue."""
    import json
    import shutil
    import threading

    from typer.testing import CliRunner

    from mcgs.cli import app

    free_mb = shutil.disk_usage(tmp_path).free / 2**20
    search = create_search(demo_task, tmp_path / "run", settings=settings(max_nodes=1, num_drafts=1, min_free_disk_mb=free_mb * 10), coder=RecipeCoder(models=FAST))
    said: list[str] = []
    search.say = said.append
    statuses: list[str] = []

    def lower_the_floor():
        while not said:
            time.sleep(0.1)
        statuses.append(search.storage.get_run(search.run_record.name).status)
        time.sleep(2.5)
        res = CliRunner().invoke(app, ["set", str(tmp_path / "run"), "min_free_disk_mb=0"])
        assert res.exit_code == 0, res.output

    t = threading.Thread(target=lower_the_floor)
    t.start()
    t0 = time.monotonic()
    search.run()
    wall = time.monotonic() - t0
    t.join()
    assert said[0].startswith("paused:") and "min_free_disk_mb" in said[0] and "mcgs set" in said[0]
    assert any("the run continues" in m for m in said) and statuses == ["paused"]
    assert json.loads((tmp_path / "run" / "overrides.json").read_text()) == {"min_free_disk_mb": 0.0}
    assert search.clock.paused_s >= 2.0
    assert search.storage.get_run(search.run_record.name).elapsed_s <= wall - 2.0  # the pause is not charged
    assert [n.is_valid for n in search.nodes() if n.parent_id is not None] == [True]
    bad = CliRunner().invoke(app, ["set", str(tmp_path / "run"), "num_drafts=3"])
    assert bad.exit_code == 2 and "min_free_disk_mb" in bad.output


def test_a_new_budget_given_on_resume_is_stored_with_the_run(tmp_path):
    """`mcgs resume RUN_DIR --time-budget 15m` opens the run with the new total; it must be the
    run's budget from then on (status, the next plain resume), not only this sitting's."""
    task = build_demo_task(tmp_path / "task")
    run_dir = tmp_path / "run"
    search = create_search(task, run_dir, settings=SearchSettings(coder="recipe", plan_candidates=0, time_budget_s=40, ensemble=False))
    search.storage.close()
    resumed = open_search(run_dir, time_budget_s=900)
    resumed._search_loop = lambda: None  # the budget is stored at the start; no candidate is needed
    resumed.run()
    resumed.storage.close()
    again = open_search(run_dir)
    assert again.settings.time_budget_s == 900 and again.clock.budget_s == 900
    again.storage.close()


def test_training_columns_missing_from_the_test_file_are_named_at_the_start(tmp_path):
    task = build_demo_task(tmp_path / "task")
    test = pd.read_csv(task / "test.csv")
    dropped = [c for c in test.columns if c not in ("id",)][:2]
    test.drop(columns=dropped).to_csv(task / "test.csv", index=False)
    search = create_search(task, tmp_path / "run", settings=SearchSettings(coder="recipe", plan_candidates=0, ensemble=False))
    said = []
    search.say = said.append
    search._search_loop = lambda: None  # said at the start; no candidate is needed
    search.run()
    search.storage.close()
    notes = [m for m in said if m.startswith("note:")]
    assert len(notes) == 1 and "2 column(s) of the training file are not in the test file" in notes[0]
    assert all(repr(c) in notes[0] for c in dropped), notes
