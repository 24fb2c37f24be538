"""GPUs for candidates, tested with a fake nvidia-smi (this machine has no GPU): detection,
the --gpus setting, one GPU per running candidate, the environment a candidate sees and the
device nodes the sandbox binds. experiments/gpu_check.py checks the same on a real GPU."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from mcgs.coders import CoderAnswer, CoderRequest
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.gpus import GpuPool, GpuSettingError, detect_gpus, device_nodes, gpu_env, gpu_memory_used_mb, parse_gpu_setting, resolve_gpus
from mcgs.node import NodeState
from mcgs.sandbox.isolation import namespace_argv
from mcgs.sandbox.limits import SandboxLimits
from mcgs.search import create_search
from mcgs.settings import SearchSettings

FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=*) printf '0, NVIDIA H100 80GB HBM3, 81559\\n1, NVIDIA H100 80GB HBM3, 81559\\n' ;;
  --query-compute-apps=*)
    if [ -n "$FAKE_SMI_FIXED" ]; then printf '4242, 1536\\n4243, 512\\n999, 70000\\n'; exit 0; fi
    # every running candidate program holds 1536 MiB of GPU memory
    for pid in $(pgrep -f 'python.* solution.py'); do printf '%s, 1536\\n' "$pid"; done ;;
  *) exit 2 ;;
esac
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch) -> Path:
    """A fake nvidia-smi listing two H100s, first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return smi


def test_detection_reads_nvidia_smi_and_a_machine_without_it_has_no_gpu(fake_smi, tmp_path):
    gpus = detect_gpus()
    assert [(g.index, g.memory_mb) for g in gpus] == [(0, 81559), (1, 81559)]
    assert gpus[0].describe() == "GPU 0 (NVIDIA H100 80GB HBM3, 80 GiB)"
    assert detect_gpus(str(tmp_path / "no-such-nvidia-smi")) == []
    os.environ["FAKE_SMI_FIXED"] = "1"
    try:
        assert gpu_memory_used_mb([4242, 4243]) == 2048.0  # the candidate's processes only
    finally:
        del os.environ["FAKE_SMI_FIXED"]


def test_the_gpus_setting(fake_smi):
    gpus = detect_gpus()
    assert resolve_gpus("auto", gpus) == gpus and resolve_gpus("none", gpus) == []
    assert [g.index for g in resolve_gpus("1", gpus)] == [1]
    with pytest.raises(GpuSettingError, match=r"GPU 3 is not on this machine; its GPUs: 0, 1"):
        resolve_gpus("0,3", gpus)
    with pytest.raises(GpuSettingError, match="give auto .*, none .*, or GPU indices such as 0 or 0,1"):
        parse_gpu_setting("all")
    with pytest.raises(ValueError, match="--gpus 'cuda'"):
        SearchSettings(gpus="cuda")
    assert SearchSettings(gpus=" 0,1 ").gpus == "0,1"


def test_each_running_candidate_holds_its_own_gpu_until_it_ends(fake_smi):
    pool = GpuPool(detect_gpus())
    a, b = pool.acquire("node 1"), pool.acquire("node 2")
    assert {a.index, b.index} == {0, 1}
    assert pool.acquire("node 3") is None  # both taken: this one runs on the CPU
    pool.release("node 1")
    assert pool.acquire("node 3").index == a.index
    shared = GpuPool(detect_gpus(), per_gpu=2)
    assert [shared.acquire(n).index for n in range(4)] == [0, 1, 0, 1] and shared.acquire(5) is None


def test_a_candidate_sees_only_its_gpu_and_the_sandbox_binds_only_its_device_nodes(tmp_path, monkeypatch):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    assert device_nodes([1], dev) == [str(dev / "nvidia1"), str(dev / "nvidiactl"), str(dev / "nvidia-uvm")]
    assert device_nodes([], dev) == []
    assert gpu_env([1]) == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert gpu_env([])["CUDA_VISIBLE_DEVICES"] == ""  # no GPU at all, not every GPU

    import mcgs.sandbox.isolation as isolation

    monkeypatch.setattr(isolation, "device_nodes", lambda indices: device_nodes(indices, dev))
    ws = tmp_path / "ws"
    ws.mkdir()
    argv, _ = namespace_argv(["python", "solution.py"], ws, SandboxLimits(timeout_s=10, gpus=(1,)))
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--dev-bind"]
    assert binds == [str(dev / "nvidia1"), str(dev / "nvidiactl"), str(dev / "nvidia-uvm")]
    argv, _ = namespace_argv(["python", "solution.py"], ws, SandboxLimits(timeout_s=10))
    assert "--dev-bind" not in argv


class GpuReporter:
    """Recipe programs that print the GPUs they were shown, and last long enough to overlap."""

    name = "gpu-reporter"

    def __init__(self):
        self.inner = RecipeCoder(models=("model.logistic_regression", "model.knn"))

    def write(self, request: CoderRequest) -> CoderAnswer:
        ans = self.inner.write(request)
        extra = ("\nimport os, time\nt0 = time.time()\ntime.sleep(2)\n"
                 "print('gpus', repr(os.environ['CUDA_VISIBLE_DEVICES']), 'held', t0, time.time())\n")
        return dataclasses.replace(ans, code=ans.code + extra)


@pytest.mark.parametrize("setting, expected", [("auto", {"'0'", "'1'"}), ("1", {"'1'", "''"}), ("none", {"''"})])
def test_two_workers_never_share_a_gpu(fake_smi, tmp_path_factory, setting, expected):
    task = build_demo_task(tmp_path_factory.mktemp("demo") / "task")
    settings = SearchSettings(time_budget_s=600, num_drafts=2, max_nodes=4, seed=0, ensemble=False, policy="tree", workers=2,
                              cpu_threads=2, gpus=setting, plan_candidates=0)
    search = create_search(task, tmp_path_factory.mktemp("run") / "run", settings=settings, coder=GpuReporter())
    search.run()
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    assert len(nodes) == 4 and all(n.state is NodeState.VALID for n in nodes)
    reports = [n.stdout_tail.split("gpus ")[1].split() for n in nodes]  # [gpu, 'held', start, end]
    seen = [r[0] for r in reports]
    assert set(seen) <= expected and (setting == "none" or set(seen) & (expected - {"''"}))
    spans = [(float(r[2]), float(r[3])) for r in reports]
    overlapping = [(i, j) for i in range(4) for j in range(i + 1, 4) if spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1]]
    assert overlapping  # two workers: candidates did run at the same time
    for i, j in overlapping:  # and two candidates running at once never held the same GPU
        assert seen[i] != seen[j] or seen[i] == "''", (i, j, seen)
    for n, gpu in zip(nodes, seen):  # the node record says which GPU, and the GPU memory its processes held
        assert n.gpu == (None if gpu == "''" else int(gpu.strip("'")))
        assert (n.peak_gpu_mb is None) == (n.gpu is None) and (n.peak_gpu_mb is None or n.peak_gpu_mb >= 1536)
        assert n.peak_rss_mb and n.peak_rss_mb > 30  # python with pandas and scikit-learn
    view = search.snapshot(details=True)
    from mcgs.status_view import status_view

    text = _render(status_view(view))
    if setting != "none":
        held = max(n.peak_gpu_mb or 0 for n in nodes) / 1024
        assert "ran on GPU" in text and f"the most GPU memory one held: {held:.1f} GiB" in text and held >= 1.5


def test_a_gpu_index_the_machine_lacks_stops_the_run_before_it_starts(fake_smi, tmp_path):
    task = build_demo_task(tmp_path / "task")
    with pytest.raises(GpuSettingError, match="GPU 7 is not on this machine"):
        create_search(task, tmp_path / "run", settings=SearchSettings(time_budget_s=60, gpus="7"), coder=RecipeCoder())


def _render(renderable) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()
