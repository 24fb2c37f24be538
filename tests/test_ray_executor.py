"""The Ray executor against a real local Ray cluster: a head and a second node process on this
machine, one CPU each, started by the module's fixture and stopped after. Candidates reach the
workers through Ray's object store (each node process gets its own input cache folder), never
through the run folder."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import mcgs
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.node import NodeState, Operator
from mcgs.run_folder import RunError

ray = pytest.importorskip("ray")

FAST = ("model.logistic_regression", "model.knn")
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cmd(args: list[str], cache: Path, temp: Path) -> None:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "MCGS_INPUT_CACHE": str(cache), "MCGS_WORKSPACES": str(cache.with_name(cache.name + "-ws"))}
    r = subprocess.run([RAY, "start", *args, "--num-cpus=1", "--object-store-memory=150000000", "--disable-usage-stats"],
                       capture_output=True, text=True, env=env, timeout=180, cwd=temp)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A two-machine Ray cluster on this machine: ``(address, [input cache of each node])``."""
    if not Path(RAY).is_file():
        pytest.skip("the ray command is not installed beside this Python")
    base = tmp_path_factory.mktemp("ray")
    port = _free_port()
    caches = [base / "cache-head", base / "cache-worker"]
    temp = Path("/tmp") / f"ray-mcgs-{port}"  # Ray's socket paths must stay short
    _ray_cmd(["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}"], caches[0], base)
    try:
        _ray_cmd([f"--address=127.0.0.1:{port}"], caches[1], base)
        yield f"127.0.0.1:{port}", caches
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


class SlowFirst(RecipeCoder):
    """Recipe programs; the first draft sleeps a few seconds first, so a test can catch it running."""

    def write(self, request):
        ans = super().write(request)
        if request.node_seq == 1:
            ans = dataclasses.replace(ans, code="import time\ntime.sleep(6)\n" + ans.code)
        return ans


def _search(tmp_path, address, coder, max_nodes, **kw):
    task = build_demo_task(tmp_path / "task")
    return mcgs.create_search(task, run_dir=tmp_path / "run", coder=coder, plan_candidates=0, time_budget_s=1800, max_nodes=max_nodes,
                              workers=2, cpu_threads=2, executor="ray", ray_address=address, **kw)


@pytest.mark.slow
def test_a_twelve_node_search_runs_every_candidate_as_a_ray_task(cluster, tmp_path, monkeypatch):
    from mcgs.evaluation import evaluate_workspace, validate_submission
    from mcgs.executors.ray_cluster import RayExecutor

    address, caches = cluster
    ran: list[int] = []
    real = RayExecutor.run

    def counted(self, job, cancel):
        ran.append(job.node_id)
        return real(self, job, cancel)

    monkeypatch.setattr(RayExecutor, "run", counted)
    search = _search(tmp_path, address, RecipeCoder(models=FAST), 12)
    final = search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    searched = [n for n in nodes if n.operator is not Operator.ENSEMBLE or n.config.get("reason") != "final"]
    assert len(nodes) >= 12 and all(n.state.is_finished() for n in nodes)
    assert sorted(ran) == sorted(n.id for n in nodes)  # every program, the ensembles included, ran as a Ray task
    assert sum(n.is_valid for n in searched) >= 11, [(n.seq, n.error) for n in nodes if not n.is_valid]
    # shipped through the object store: each machine unpacked the task's input into its own cache
    assert any(list(c.glob("*/input/task.json")) for c in caches)
    for n in (n for n in nodes if n.is_valid):  # scored by the engine, from the outputs written back into the run folder
        assert n.score == evaluate_workspace(search.labels, search.node_dir(n)).score
        assert (search.node_dir(n) / "logs" / "stdout.txt").is_file() and not (search.node_dir(n) / "tmp").exists()
    best = tmp_path / "run" / "best"
    assert final is not None and (best / "solution.py").read_text() == final.code
    validate_submission(search.task, search.labels.sample, best, "submission.csv")  # raises on any problem
    assert (best / "submission.csv").read_bytes() == (search.node_dir(final) / "submission" / "submission.csv").read_bytes()
    assert search.storage.get_run(search.run_record.name).status == "finished"
    assert not any(list(c.with_name(c.name + "-ws").iterdir()) for c in caches if c.with_name(c.name + "-ws").exists())  # none left
    assert search.executor is None  # the connection was given back


def _ray_worker_of(pid: int) -> psutil.Process | None:
    """The Ray worker process above a candidate's process."""
    proc = psutil.Process(pid)
    for parent in proc.parents():
        if "ray::" in " ".join(parent.cmdline()) or "default_worker.py" in " ".join(parent.cmdline()):
            return parent
    return None


def _running_candidate(run_dir: Path) -> psutil.Process | None:
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.info["cmdline"] and p.info["cmdline"][-1:] == ["solution.py"] and "sleep(6)" in Path(p.cwd(), "solution.py").read_text():
                return p
        except (psutil.Error, OSError):
            continue
    return None


def _search_in_thread(tmp_path, address):
    """A four-node search whose first program sleeps first, run in a thread: ``(search, thread,
    errors)`` (what ``run`` raised goes in ``errors``)."""
    search = _search(tmp_path, address, SlowFirst(models=FAST), 4, ensemble=False)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _catch(search.run, errors), daemon=True)
    thread.start()
    return search, thread, errors


def test_a_killed_ray_worker_requeues_its_node_and_the_run_finishes(cluster, tmp_path):
    search, thread, errors = _search_in_thread(tmp_path, cluster[0])
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and thread.is_alive():
        cand = _running_candidate(tmp_path / "run")
        worker = _ray_worker_of(cand.pid) if cand else None
        if worker is not None:
            worker.send_signal(signal.SIGKILL)
            killed = worker.pid
        time.sleep(0.2)
    thread.join(timeout=300)
    assert not errors and not thread.is_alive()
    assert killed is not None, "the first candidate was never seen running under a Ray worker"
    assert _running_candidate(tmp_path / "run") is None  # the killed worker's candidate went with it
    first = next(n for n in search.nodes() if n.seq == 1)
    assert first.attempts == 2 and first.state is NodeState.VALID  # queued again, run again, scored
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    assert len(nodes) == 4 and all(n.state.is_finished() for n in nodes)
    assert search.storage.get_run(search.run_record.name).status == "finished"


def test_a_stop_cancels_the_running_ray_task_and_its_program(cluster, tmp_path):
    search, thread, errors = _search_in_thread(tmp_path, cluster[0])
    deadline = time.monotonic() + 120
    while _running_candidate(tmp_path / "run") is None and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.2)
    assert _running_candidate(tmp_path / "run") is not None
    search.request_stop()  # what Ctrl-C does
    thread.join(timeout=120)
    assert not thread.is_alive() and len(errors) == 1 and isinstance(errors[0], KeyboardInterrupt)
    assert _running_candidate(tmp_path / "run") is None  # cancelled on its worker, not left running
    first = next(n for n in search.nodes() if n.seq == 1)
    assert first.state is NodeState.INTERRUPTED and search.storage.get_run(search.run_record.name).status == "stopped"


def _catch(fn, errors):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - handed to the test
        errors.append(exc)


def test_sigkill_of_the_engine_then_resume_on_ray_loses_no_node(cluster, tmp_path):
    address, _ = cluster
    task = build_demo_task(tmp_path / "task")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "mcgs", "run", str(task), "--out", str(run), "--executor", "ray", "--ray-address", address,
           "--models", ",".join(FAST), "--plans", "0", "--max-nodes", "6", "--workers", "2", "--cpu-threads", "2", "--time-budget", "20m"]
    engine = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and engine.poll() is None:
            try:  # the engine writes the schema, then the run's record: between the two there is no run to read
                snap = mcgs.load_run(run) if (run / "mcgs.db").is_file() else None
            except RunError:
                snap = None
            if snap is not None and sum(n.state.is_finished() for n in snap.search_nodes) >= 2 and any(
                    n.state is NodeState.RUNNING for n in snap.search_nodes):
                break
            time.sleep(0.3)
        assert engine.poll() is None, "the engine ended before it could be killed"
        engine.send_signal(signal.SIGKILL)
        engine.wait(timeout=30)
    finally:
        if engine.poll() is None:
            engine.kill()
    before = mcgs.load_run(run)
    running = [n.seq for n in before.search_nodes if n.state is NodeState.RUNNING]
    assert running
    res = subprocess.run([sys.executable, "-m", "mcgs", "resume", str(run), "--executor", "ray", "--ray-address", address],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    after = mcgs.load_run(run)
    nodes = {n.seq: n for n in after.search_nodes}
    assert after.status == "finished"
    assert all(nodes[s].state.is_finished() and nodes[s].state is not NodeState.INTERRUPTED for s in running)  # run again, not lost
    assert not [n.seq for n in after.search_nodes if n.state is NodeState.INTERRUPTED]
    assert sum(n.state.is_finished() for n in after.search_nodes) >= 6
    status = subprocess.run([sys.executable, "-m", "mcgs", "status", str(run)], capture_output=True, text=True, timeout=120)
    assert f"executor: ray at {address}" in status.stdout


def test_without_ray_or_a_cluster_the_run_says_how_to_fix_it(tmp_path, monkeypatch):
    from mcgs.run_folder import RunError

    task = build_demo_task(tmp_path / "task")
    port = _free_port()  # nothing listens there
    search = mcgs.create_search(task, run_dir=tmp_path / "run", coder=RecipeCoder(models=FAST), executor="ray",
                                ray_address=f"127.0.0.1:{port}", max_nodes=2)
    with pytest.raises(RunError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        search.run()
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(RunError, match=r"pip install 'mcgs\[ray\]'"):
        search.run()
    assert not [n for n in search.nodes() if n.parent_id is not None]  # nothing started


def test_a_candidate_asks_ray_for_its_threads_its_memory_and_a_gpu_when_it_trains_a_network(tmp_path):
    from mcgs.executors import Job
    from mcgs.executors.ray_cluster import RayExecutor, gpus_per_candidate
    from mcgs.sandbox import SandboxLimits

    assert gpus_per_candidate(True, "auto", 2) == 1 and gpus_per_candidate(True, "none", 2) == 0
    assert gpus_per_candidate(False, "auto", 2) == 0 and gpus_per_candidate(True, "auto", 0) == 0
    ex = RayExecutor.__new__(RayExecutor)  # its resource request, without a cluster
    ex.gpus_per_candidate, ex.memory_bytes, ex.max_memory = 1, 8192 * 2**20, 4 * 2**30
    job = Job(node_id=1, workspace=tmp_path, input_dir=tmp_path, limits=SandboxLimits(timeout_s=60, cpu_threads=3), env={},
              cancel_after_s=None, max_output_bytes=2**20)
    assert ex._options(job) == {"num_cpus": 3, "num_gpus": 1, "memory": 4 * 2**30}  # no more than the largest machine has
