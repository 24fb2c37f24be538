"""ask/tell: the caller runs the candidates its own way while mcgs selects, scores and stores
(Optuna's ask-and-tell interface, docs/api.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

import mcgs
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.evaluation import evaluate_workspace
from mcgs.node import NodeState, Operator
from mcgs.sandbox import Outcome, result_of_run


FAST = ("model.logistic_regression", "model.knn")
# a line a program prints to claim a score: the engine never reads it
BRAG = "\nprint('validation roc_auc: 1.0000')\n"


def _run_it(search, node):
    """Run an asked node's program the caller's way: a plain subprocess in its workspace."""
    t0 = time.monotonic()
    env = {**os.environ, "MCGS_SEED": str(search.node_seed(node)), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "solution.py"], cwd=search.node_dir(node), capture_output=True, text=True, env=env, timeout=300)
    return result_of_run(proc.returncode, time.monotonic() - t0, proc.stdout, proc.stderr)


class Bragging(RecipeCoder):
    """Recipe programs that print a perfect score, and one program that crashes."""

    def write(self, request):
        import dataclasses

        ans = super().write(request)
        code = ans.code + BRAG
        if request.node_seq == 4:
            code = "raise ValueError('the caller sees this one fail')\n" + code  # passes the review, fails when run
        return dataclasses.replace(ans, code=code)


@pytest.mark.slow
def test_ask_and_tell_drive_a_search_to_ten_nodes_scored_by_the_engine_and_resumable(tmp_path):
    task = build_demo_task(tmp_path / "task")
    search = mcgs.create_search(task, run_dir=tmp_path / "run", coder=Bragging(models=FAST), ensemble=False, plan_candidates=0,
                                time_budget_s=3600, max_nodes=10)
    told = []
    while (node := search.ask()) is not None:
        assert node.state is NodeState.RUNNING and (search.node_dir(node) / "solution.py").read_text() == node.code
        told.append(search.tell(node, _run_it(search, node)))
    assert search.stop_reason is mcgs.StopReason.NODES
    search.stop()  # gives the engine lock back; nothing is left running
    assert len(told) == 10 and [n.seq for n in told] == list(range(1, 11))
    failed = next(n for n in told if n.seq == 4)
    assert failed.state is NodeState.BUGGY and "the caller sees this one fail" in failed.error
    valid = [n for n in told if n.state is NodeState.VALID]
    assert len(valid) == 9
    for n in valid:  # the engine's score of the node's OOF predictions, never the printed 1.0
        assert "validation roc_auc: 1.0000" in n.stdout_tail
        assert n.score == evaluate_workspace(search.labels, search.node_dir(n)).score < 1.0
    assert {n.operator for n in told} >= {Operator.DRAFT, Operator.IMPROVE}  # the policy chose
    # stored: another process reads what was told
    snap = mcgs.load_run(tmp_path / "run")
    assert [(n.seq, n.state, n.score) for n in snap.search_nodes] == [(n.seq, n.state, n.score) for n in told]
    assert snap.status == "stopped" and snap.chosen_node.score == max(n.score for n in valid)
    # resumable: the search goes on from storage with its own executor
    again = mcgs.load_search(tmp_path / "run", coder=RecipeCoder(models=FAST))
    again.run(max_nodes=12)
    nodes = [n for n in again.nodes() if n.parent_id is not None]
    assert len(nodes) == 12 and [(n.seq, n.score) for n in nodes[:10]] == [(n.seq, n.score) for n in told]
    assert again.storage.get_run(again.run_record.name).status == "finished"
    assert (tmp_path / "run" / "best" / "submission.csv").is_file()


def test_finish_ends_an_ask_tell_run_with_its_final_ensemble_and_best(tmp_path):
    task = build_demo_task(tmp_path / "task")
    search = mcgs.create_search(task, run_dir=tmp_path / "run", coder=RecipeCoder(models=FAST), plan_candidates=0, time_budget_s=3600)
    for _ in range(3):
        node = search.ask()
        search.tell(node, _run_it(search, node))
    with pytest.raises(mcgs.RunError, match="being searched|engine"):  # one engine per run, ask/tell included
        mcgs.load_search(tmp_path / "run").run()
    final = search.finish()
    assert final is not None and search.storage.get_run(search.run_record.name).status == "finished"
    assert pd.read_csv(tmp_path / "run" / "best" / "submission.csv").shape[0] == len(pd.read_csv(task / "test.csv"))
    assert final.operator in (Operator.ENSEMBLE, Operator.DRAFT, Operator.IMPROVE)
    assert result_of_run(0, 1.0).outcome is Outcome.OK and result_of_run(1, 1.0, stderr="boom").outcome is Outcome.BUGGY
    assert result_of_run(-9, 5.0, timed_out=True).outcome is Outcome.TIMEOUT
    assert result_of_run(-15, 2.0, cancelled=True).outcome is Outcome.CANCELLED  # stored interrupted: no verdict
