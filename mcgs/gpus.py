"""GPUs for candidates: which ones the machine has, which ones a run may use (``--gpus``), and
which running candidate holds which.

A candidate that holds a GPU sees only it: ``CUDA_VISIBLE_DEVICES`` is its index (with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so the index is nvidia-smi's), and the namespace sandbox binds
its device node (``/dev/nvidiaN``) and the driver's control nodes, nothing more. A candidate
without one gets ``CUDA_VISIBLE_DEVICES=""``: PyTorch then reports no GPU and the recipe programs
train on the CPU. At most ``per_gpu`` candidates hold one GPU at once (1: no sharing unless a
user asks for it, as two trainings on one GPU slow each other and share its memory).

Detection asks ``nvidia-smi`` (present wherever NVIDIA's driver is); a machine without it has no
GPU for the engine.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
from pathlib import Path
from typing import Hashable, Literal, Sequence

__all__ = [
    "Gpu",
    "GpuPool",
    "GpuSettingError",
    "detect_gpus",
    "parse_gpu_setting",
    "resolve_gpus",
    "device_nodes",
    "gpu_env",
    "gpu_memory_used_mb",
    "gpu_pool_for",
]

#: Seconds nvidia-smi may take before the engine decides there is no usable GPU.
NVIDIA_SMI_TIMEOUT_S = 15.0
#: Device nodes every CUDA program needs besides its GPU's own ``/dev/nvidiaN``.
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


class GpuSettingError(ValueError):
    """A ``--gpus`` value that is not ``auto``, ``none`` or a list of the machine's GPU indices."""


@dataclasses.dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi lists it.

    Attributes:
        index: nvidia-smi's index (PCI bus order).
        name: Model name (``NVIDIA H100 80GB HBM3``).
        memory_mb: Total memory, MiB.
    """

    index: int
    name: str
    memory_mb: int

    def describe(self) -> str:
        return f"GPU {self.index} ({self.name}, {self.memory_mb / 1024:.0f} GiB)"


def _nvidia_smi(args: Sequence[str], nvidia_smi: str) -> str | None:
    """nvidia-smi's output, or None when it is missing, fails or hangs."""
    try:
        out = subprocess.run([nvidia_smi, *args], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def detect_gpus(nvidia_smi: str = "nvidia-smi") -> list[Gpu]:
    """The machine's GPUs (``nvidia-smi --query-gpu=index,name,memory.total``), in index order;
    empty when nvidia-smi is missing or fails (no NVIDIA driver: no GPU)."""
    text = _nvidia_smi(["--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"], nvidia_smi)
    gpus = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        try:
            memory = int(float(parts[2]))
        except ValueError:
            memory = 0
        gpus.append(Gpu(int(parts[0]), parts[1], memory))
    return sorted(gpus, key=lambda g: g.index)


def parse_gpu_setting(value: str) -> Literal["auto", "none"] | tuple[int, ...]:
    """``auto`` (every GPU the machine has), ``none`` (the CPU only) or comma-separated indices
    (``0,1``).

    Raises:
        GpuSettingError: anything else, naming the value and what is accepted.
    """
    text = str(value).strip().lower()
    if text in ("auto", "none"):
        return text  # type: ignore[return-value]
    try:
        indices = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        indices = ()
    if not indices or any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise GpuSettingError(f"--gpus {value!r}: give auto (every GPU nvidia-smi lists), none (CPU only), or GPU indices such as 0 or 0,1")
    return indices


def resolve_gpus(setting: str, detected: Sequence[Gpu]) -> list[Gpu]:
    """The GPUs a run uses: ``setting`` (:func:`parse_gpu_setting`) applied to ``detected``.

    Raises:
        GpuSettingError: an index the machine does not have (naming the ones it has).
    """
    parsed = parse_gpu_setting(setting)
    if parsed == "auto":
        return list(detected)
    if parsed == "none":
        return []
    by_index = {g.index: g for g in detected}
    missing = [i for i in parsed if i not in by_index]
    if missing:
        have = ", ".join(str(g.index) for g in detected) or "none (nvidia-smi lists no GPU)"
        raise GpuSettingError(f"--gpus {setting!r}: GPU {', '.join(map(str, missing))} is not on this machine; its GPUs: {have}")
    return [by_index[i] for i in parsed]


class GpuPool:
    """Hands the run's GPUs to running candidates, at most ``per_gpu`` candidates per GPU.

    Args:
        gpus: The run's GPUs (:func:`resolve_gpus`).
        per_gpu: Candidates that may share one GPU (1 = none share).

    Thread-safe: the search's worker threads acquire and release.
    """

    def __init__(self, gpus: Sequence[Gpu], per_gpu: int = 1):
        if per_gpu < 1:
            raise ValueError(f"per_gpu must be >= 1, got {per_gpu}")
        self.gpus = list(gpus)
        self.per_gpu = per_gpu
        self._holders: dict[int, list[Hashable]] = {g.index: [] for g in self.gpus}
        self._lock = threading.Lock()

    def acquire(self, owner: Hashable) -> Gpu | None:
        """A GPU for ``owner`` (the least held one with room, lowest index first), or None when
        every GPU is full or the run has none: the candidate runs on the CPU."""
        with self._lock:
            free = [g for g in self.gpus if len(self._holders[g.index]) < self.per_gpu]
            if not free:
                return None
            gpu = min(free, key=lambda g: (len(self._holders[g.index]), g.index))
            self._holders[gpu.index].append(owner)
            return gpu

    def release(self, owner: Hashable) -> None:
        """Give back what ``owner`` holds (nothing when it holds nothing)."""
        with self._lock:
            for held in self._holders.values():
                while owner in held:
                    held.remove(owner)

    def holders(self) -> dict[int, list[Hashable]]:
        """``{GPU index: [owners]}`` now (a copy)."""
        with self._lock:
            return {i: list(h) for i, h in self._holders.items()}


def gpu_pool_for(setting: str, per_gpu: int = 1, nvidia_smi: str = "nvidia-smi") -> GpuPool:
    """A run's :class:`GpuPool`: ``setting`` (``--gpus``) resolved against the GPUs nvidia-smi
    lists (not asked when ``setting`` is ``none``).

    Raises:
        GpuSettingError: an index the machine does not have.
    """
    import logging

    gpus = resolve_gpus(setting, detect_gpus(nvidia_smi) if str(setting).strip().lower() != "none" else [])
    if gpus:
        logging.getLogger(__name__).info("candidates may use %s", ", ".join(g.describe() for g in gpus))
    return GpuPool(gpus, per_gpu)


def device_nodes(indices: Sequence[int], dev: Path = Path("/dev")) -> list[str]:
    """The device nodes a program using GPUs ``indices`` needs: ``/dev/nvidiaN`` for each and the
    driver's control nodes (:data:`CONTROL_NODES`), those that exist."""
    if not indices:
        return []
    names = [f"nvidia{i}" for i in indices] + list(CONTROL_NODES)
    return [str(dev / n) for n in names if os.path.exists(dev / n)]


def gpu_env(indices: Sequence[int]) -> dict[str, str]:
    """The environment that shows a program only GPUs ``indices`` (none: no GPU at all)."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in indices), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def gpu_memory_used_mb(pids: Sequence[int], nvidia_smi: str = "nvidia-smi") -> float | None:
    """GPU memory the processes ``pids`` hold now, MiB, summed over GPUs
    (``nvidia-smi --query-compute-apps=pid,used_memory``); None when nvidia-smi cannot say."""
    text = _nvidia_smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], nvidia_smi)
    if text is None:
        return None
    wanted = set(pids)
    total = 0.0
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in wanted:
            try:
                total += float(parts[1])
            except ValueError:
                continue
    return total
