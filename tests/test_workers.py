"""Parallel workers on one machine: two candidates run at once with a share of the cores each,
in different branches, and a stop interrupts both and leaves a resumable run."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.node import NodeState
from mcgs.sandbox import live_candidates
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings


@pytest.fixture(scope="module")
def demo_task(tmp_path_factory):
    return build_demo_task(tmp_path_factory.mktemp("demo") / "task")


class ThreadReporter:
    """Recipe programs that print the thread count the sandbox granted, and take a little
    longer (so that two of them overlap for sure)."""

    name = "thread-reporter"

    def __init__(self, sleep_s: float = 2.0, max_seed: int | None = None):
        self.inner = RecipeCoder(models=("model.logistic_regression", "model.knn"))
        self.sleep_s = sleep_s
        self.max_seed = max_seed  # sleep only in nodes whose MCGS_SEED (seed 0: the node number) is at most this

    def write(self, request: CoderRequest) -> CoderAnswer:
        ans = self.inner.write(request)
        sleep = f"{self.sleep_s}" if self.max_seed is None else f"{self.sleep_s} if int(os.environ['MCGS_SEED']) <= {self.max_seed} else 0"
        extra = f"\nimport os, time\nprint('threads', os.environ['OMP_NUM_THREADS'])\ntime.sleep({sleep})\n"
        return dataclasses.replace(ans, code=ans.code + extra)


def test_two_workers_run_two_candidates_at_once_and_selection_sees_the_one_in_flight(demo_task, tmp_path, monkeypatch):
    import mcgs.expansion as search_mod

    in_flight_at_selection: list[int] = []
    real_select = search_mod.select_expansion

    def recording_select(g, *args, **kwargs):
        in_flight_at_selection.append(sum(d["node"].state in (NodeState.PENDING, NodeState.RUNNING) for _, d in g.nodes(data=True)))
        return real_select(g, *args, **kwargs)

    monkeypatch.setattr(search_mod, "select_expansion", recording_select)
    settings = SearchSettings(time_budget_s=600, num_drafts=2, max_nodes=6, seed=0, ensemble=False, policy="tree", workers=2, cpu_threads=2)
    search = create_search(demo_task, tmp_path / "run", settings=settings, coder=ThreadReporter())
    search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    assert len(nodes) == 6 and all(n.state is NodeState.VALID for n in nodes)
    assert all("threads 1" in n.stdout_tail for n in nodes)  # each of 2 workers gets 1 of 2 cores
    assert len({n.seq for n in nodes}) == 6
    # overlap: some node was launched before the previous one finished
    overlaps = [(a.seq, b.seq) for a, b in zip(nodes, nodes[1:]) if b.created_at < a.finished_at]
    assert overlaps
    # the second selection ran while the first worker's node was in flight, and saw it (as a
    # visit with the virtual loss; what the policy does with it is tested in
    # tests/test_policy.py::test_virtual_loss_sends_a_second_worker_to_another_branch). Later
    # selections see 0 or 1 in flight depending on which worker finished when.
    assert len(in_flight_at_selection) == 6 and in_flight_at_selection[:2] == [0, 1]
    assert max(in_flight_at_selection) == 1


def test_stop_interrupts_every_worker_and_the_run_resumes(demo_task, tmp_path):
    settings = SearchSettings(time_budget_s=600, num_drafts=2, max_nodes=4, seed=0, ensemble=False, policy="tree", workers=2)
    search = create_search(demo_task, tmp_path / "run", settings=settings, coder=ThreadReporter(sleep_s=60, max_seed=2))
    # nodes 1 and 2 hold on until the stop; their copies queued by the resume (nodes 3 and 4, the
    # same programs) and the nodes after them do not sleep
    timer = threading.Timer(8.0, search.request_stop)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        search.run()
    timer.cancel()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    assert [n.state for n in nodes] == [NodeState.INTERRUPTED, NodeState.INTERRUPTED]
    assert live_candidates(under=tmp_path / "run") == []
    assert search.storage.get_run(search.run_record.name).status == "stopped"
    again = open_search(tmp_path / "run", coder=ThreadReporter(sleep_s=0))
    again.run()
    done = [n for n in again.nodes() if n.state is NodeState.VALID]
    assert len(done) == 4
