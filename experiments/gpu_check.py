"""A short real check of the GPU path, for a machine with an NVIDIA GPU (about a minute).

Usage (from the repository root, after `make install-vision` or with a CUDA build of PyTorch):

    .venv/bin/python experiments/gpu_check.py [--isolation namespaces|process-session]

What it does, as the search does it (:mod:`mcgs.gpus`, :func:`mcgs.sandbox.run_program`):

1. detects the GPUs with nvidia-smi and hands GPU 0 to a candidate through a :class:`GpuPool`;
2. runs, in the sandbox with that GPU, a program that imports PyTorch, checks it sees exactly one
   CUDA device (the one handed over), and trains model.image_cnn's network for a few batches on
   random 32 x 32 images in mixed precision, timing them against the same batches on the CPU;
3. runs the same program with no GPU handed over and checks it sees none and trains on the CPU;
4. reads the candidate's GPU memory while it runs (nvidia-smi --query-compute-apps).

It prints one line per step and ends with ``GPU check passed`` (exit 0), or names the step that
failed (exit 1). Without nvidia-smi it says so and exits 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

PROGRAM = r'''
import json, os, time
import torch
from torch import nn
out = {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda": torch.cuda.is_available(),
       "count": torch.cuda.device_count()}
device = torch.device("cuda" if out["cuda"] else "cpu")
if out["cuda"]:
    out["name"] = torch.cuda.get_device_name(0)
net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Linear(64, 2)).to(device)
opt = torch.optim.AdamW(net.parameters(), 1e-3)
scaler = torch.amp.GradScaler(enabled=out["cuda"])
x = torch.randn(512, 3, 32, 32, device=device)
y = torch.randint(0, 2, (512,), device=device)
t0 = time.time()
for _ in range(int(os.environ.get("STEPS", "40"))):
    with torch.autocast(device.type, dtype=torch.float16, enabled=out["cuda"]):
        loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
if out["cuda"]:
    torch.cuda.synchronize()
    time.sleep(2)  # hold the memory while the engine measures it
out["seconds"] = time.time() - t0
out["loss"] = float(loss)
print(json.dumps(out))
'''


def _run(gpus: tuple[int, ...], isolation: str, steps: int) -> dict:
    import json

    from mcgs.sandbox import SandboxLimits, run_program

    with tempfile.TemporaryDirectory(prefix="mcgs-gpu-check-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "solution.py").write_text(PROGRAM)
        limits = SandboxLimits(timeout_s=300, memory_mb=16384, cpu_threads=2, isolation=isolation, gpus=gpus)
        result = run_program(ws, "solution.py", limits, extra_env={"STEPS": str(steps)})
        if result.returncode != 0:
            raise RuntimeError(f"the program failed ({result.outcome.value}): {result.stderr_tail[-1500:]}")
        return json.loads(result.stdout_tail.strip().splitlines()[-1])


def main() -> int:
    from mcgs.gpus import GpuPool, detect_gpus, gpu_memory_used_mb
    from mcgs.sandbox import resolve_isolation

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isolation", default="auto", help="auto (the search's default), namespaces or process-session")
    args = ap.parse_args()
    gpus = detect_gpus()
    if not gpus:
        print("no GPU: nvidia-smi is missing or lists none; run this on a machine with an NVIDIA GPU")
        return 2
    isolation = resolve_isolation(args.isolation)
    print(f"1. detected: {', '.join(g.describe() for g in gpus)}; sandbox isolation: {isolation}")
    pool = GpuPool(gpus)
    gpu = pool.acquire("check")
    peak = [0.0]
    done = threading.Event()

    def watch():  # the candidate's GPU memory, as nvidia-smi reports it for any process on the GPU
        import subprocess

        while not done.is_set():
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True, text=True)
            pids = [int(p) for p in out.stdout.split() if p.strip().isdigit()]
            used = gpu_memory_used_mb(pids) or 0.0
            peak[0] = max(peak[0], used)
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        on_gpu = _run((gpu.index,), isolation, steps=200)
    finally:
        done.set()
        pool.release("check")
    ok = on_gpu["cuda"] and on_gpu["count"] == 1 and on_gpu["visible"] == str(gpu.index)
    print(f"2. with GPU {gpu.index}: sees {on_gpu['count']} CUDA device(s) ({on_gpu.get('name')}), "
          f"CUDA_VISIBLE_DEVICES={on_gpu['visible']!r}; 200 steps in {on_gpu['seconds']:.2f} s, loss {on_gpu['loss']:.3f}")
    if not ok:
        print("FAILED at step 2: the candidate should see exactly the GPU it was handed")
        return 1
    on_cpu = _run((), isolation, steps=20)
    print(f"3. without a GPU: sees {on_cpu['count']} CUDA device(s), CUDA_VISIBLE_DEVICES={on_cpu['visible']!r}; "
          f"20 steps in {on_cpu['seconds']:.2f} s on the CPU (GPU {on_cpu['seconds'] * 10 / max(on_gpu['seconds'], 1e-6):.0f}x faster per step)")
    if on_cpu["cuda"] or on_cpu["visible"] != "":
        print("FAILED at step 3: a candidate without a GPU must see none")
        return 1
    print(f"4. the candidate's peak GPU memory: {peak[0]:.0f} MiB")
    if peak[0] <= 0:
        print("FAILED at step 4: nvidia-smi reported no memory for the candidate")
        return 1
    print("GPU check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
