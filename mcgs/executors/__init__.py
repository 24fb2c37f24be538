"""Where a claimed node's program runs: the executor interface, and the local executor.

The engine stays the one process that selects, writes, scores and stores. Once a node is claimed
and its workspace prepared (:func:`mcgs.execution.execute`), it hands an executor a :class:`Job`
and gets back the sandbox's :class:`~mcgs.sandbox.ExecutionResult`, with the program's output
files in the node's workspace; it then scores them itself. An executor is three members:

* ``name``: how runs and messages call it (``local``, ``ray``);
* ``run(job, cancel) -> ExecutionResult``: run the program, blocking; when ``cancel`` is set,
  stop it and return outcome ``CANCELLED``; raise :class:`CandidateLost` when the machine or
  process that ran it was lost (the engine queues the node again, at most ``max_attempts``
  times, as for a worker whose lease lapsed);
* ``close()``: give back what it holds (a cluster connection).

The engine's worker threads call ``run`` concurrently (``workers`` at once). Three ways exist:
:class:`LocalExecutor` (this machine's sandbox, the default), :class:`~mcgs.executors.ray_cluster.RayExecutor`
(each candidate a Ray task on whichever machine Ray places it; ``executor="ray"``), and the
caller's own through :meth:`mcgs.search.Search.ask` / :meth:`~mcgs.search.Search.tell`.
A Dask executor would submit :func:`mcgs.executors.shipping.run_shipped` as the Ray one does.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Mapping, Protocol

from mcgs.sandbox import ExecutionResult, SandboxLimits, run_program

__all__ = ["Job", "Executor", "CandidateLost", "ExecutorError", "LocalExecutor", "make_executor", "EXECUTORS"]

#: The executors a run may name (setting ``executor``, ``mcgs run --executor``).
EXECUTORS = ("local", "ray")


class ExecutorError(RuntimeError):
    """An executor that cannot start; the message says why and what to do."""


class CandidateLost(RuntimeError):
    """The machine or process running a candidate was lost (a Ray worker that crashed, a node
    that died, a task killed by the cluster's memory monitor): no verdict on the program."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One run of a node's program, as the engine hands it to an executor.

    Attributes:
        node_id: The node's id (a GPU is held in its name).
        workspace: The node's prepared workspace on the engine's machine (``solution.py``,
            ``input`` linked to ``input_dir``); the outputs must be there when ``run`` returns.
        input_dir: The task input the workspace's ``input`` shows (the run's, or a fidelity's
            subsample), resolved.
        limits: Its sandbox limits (time, memory, threads, isolation, disk).
        env: Extra environment variables (``MCGS_SEED``).
        cancel_after_s: Seconds after which the run's budget ends, when before ``limits.timeout_s``.
        max_output_bytes: Cap on one output file, bytes (setting ``max_output_mb``).
    """

    node_id: int
    workspace: Path
    input_dir: Path
    limits: SandboxLimits
    env: Mapping[str, str]
    cancel_after_s: float | None
    max_output_bytes: int


class Executor(Protocol):
    """Runs node programs for the engine (see the module docstring)."""

    name: str

    def run(self, job: Job, cancel: threading.Event) -> ExecutionResult:
        """Run ``job``'s program and return how it ended, its outputs in ``job.workspace``."""
        ...

    def close(self) -> None:
        """Give back what the executor holds."""
        ...


class LocalExecutor:
    """This machine's sandbox (:func:`mcgs.sandbox.run_program`), one GPU of the run's
    :class:`~mcgs.gpus.GpuPool` per candidate while one is free.

    Args:
        gpu_pool: The run's GPUs and their holders.
    """

    name = "local"

    def __init__(self, gpu_pool):
        self.gpu_pool = gpu_pool

    def run(self, job: Job, cancel: threading.Event) -> ExecutionResult:
        """Run the program in its workspace here; see :class:`Executor`."""
        gpu = self.gpu_pool.acquire(job.node_id)  # a GPU of its own while one is free, else the CPU
        try:
            limits = dataclasses.replace(job.limits, gpus=(gpu.index,) if gpu else ())
            return run_program(job.workspace, "solution.py", limits, extra_env=dict(job.env), cancel=cancel,
                               cancel_after_s=job.cancel_after_s)
        finally:
            self.gpu_pool.release(job.node_id)

    def close(self) -> None:
        """Nothing to give back."""


def make_executor(settings, gpu_pool, gpu_tasks: bool = False, say=print) -> Executor:
    """The executor a run's settings name (``settings.executor``).

    Args:
        settings: The run's :class:`~mcgs.settings.SearchSettings` (``executor``, ``ray_address``).
        gpu_pool: The run's :class:`~mcgs.gpus.GpuPool` (the local executor's GPUs).
        gpu_tasks: The task's programs train networks that use a GPU (a cluster is asked for one).
        say: Where progress lines go (connecting to a cluster).

    Raises:
        ExecutorError: the executor cannot start (Ray not installed, no cluster at the
            address); the message says how to fix it.
    """
    if settings.executor == "ray":
        from mcgs.executors.ray_cluster import RayExecutor

        return RayExecutor(address=settings.ray_address, gpus=settings.gpus, memory_mb=settings.memory_mb, gpu_tasks=gpu_tasks,
                           say=say)
    return LocalExecutor(gpu_pool)
