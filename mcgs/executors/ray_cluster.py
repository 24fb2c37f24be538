"""Candidates as Ray tasks: the Ray executor (``mcgs run TASK --executor ray [--ray-address ADDR]``).

Each candidate is one Ray task, placed by Ray on any machine of the cluster that has its
resources free: ``num_cpus`` = the candidate's threads, ``memory`` = its memory limit (bytes,
no more than the largest machine offers), ``num_gpus`` = 1 when the task asks for a GPU (an image
task, with ``--gpus`` not ``none``) and the cluster has GPUs. The task runs the program in the
same sandbox as a local run (:func:`mcgs.executors.shipping.run_shipped`), so every machine
needs mcgs (``pip install 'mcgs[ray]'``) and, for the namespace sandbox, bubblewrap.

No shared file system is needed. The task's input is packed and put into Ray's object store
once per run and input (a fidelity's subsample is an input of its own); the first candidate on a
machine unpacks it into that machine's cache. The node's workspace goes with the task; the
program's output files come back as the task's result, within the size caps, and the engine
writes them into the node's workspace and scores them there.

Faults: a task whose worker process or machine died, or that Ray's memory monitor killed
(``WorkerCrashedError``, ``NodeDiedError``, ``OutOfMemoryError``, a lost object), raises
:class:`~mcgs.executors.CandidateLost`: the engine queues the node again, at most
``max_attempts`` times. Ray's own retries are off (``max_retries=0``) so that the engine counts
the attempts. A stop (Ctrl-C) cancels the run's tasks (``ray.cancel``; the sandbox on the
worker stops the program's processes); an engine that is killed takes its tasks with it (Ray
ends a driver's tasks when the driver dies), and ``mcgs resume --executor ray`` queues their
nodes again. Ray's usage statistics are off unless ``RAY_USAGE_STATS_ENABLED`` says otherwise.

The pattern of a central driver with stateless remote tasks follows FLAML's ``use_ray`` and
Ray Tune's function trainables; the object-store broadcast of a large input is Ray's documented
``ray.put`` pattern ("Pass large arguments by reference").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from mcgs.executors import CandidateLost, ExecutorError, Job
from mcgs.executors.shipping import ShippedRun, input_key, pack_folder, run_shipped, write_outputs
from mcgs.sandbox import ExecutionResult, Outcome

__all__ = ["RayExecutor", "gpus_per_candidate", "INSTALL_HINT", "QUEUE_GRACE_S"]

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'mcgs[ray]' (on the engine's machine and on every machine of the Ray cluster)"
#: Seconds a task may wait for a machine with its resources, beyond its own time limit, before
#: the engine gives up on it (CandidateLost: the node is queued again).
QUEUE_GRACE_S = 600.0
#: Seconds to wait for a cancelled task to end before returning without it.
CANCEL_WAIT_S = 30.0
#: Seconds the probe task at the start may take (a cold cluster starts worker processes).
PROBE_TIMEOUT_S = 180.0


def gpus_per_candidate(gpu_tasks: bool, gpus: str, cluster_gpus: float) -> int:
    """GPUs a candidate asks Ray for: 1 when the task's programs train networks (``gpu_tasks``),
    the run's ``--gpus`` is not ``none`` and the cluster has a GPU; else 0."""
    return 1 if gpu_tasks and str(gpus).strip().lower() != "none" and cluster_gpus >= 1 else 0


def _ray_task(job: ShippedRun, input_box: list):
    """The Ray task: run ``job`` on this machine (the input's object reference comes inside a
    list, so Ray hands the reference and the input is fetched only when this machine's cache
    lacks it)."""
    import ray

    gpus = tuple(int(g) for g in ray.get_gpu_ids())
    return run_shipped(job, lambda: ray.get(input_box[0]), gpus)


def _probe() -> dict:
    """What a worker machine offers: its host name, mcgs's version, the namespace sandbox."""
    import socket

    import mcgs
    from mcgs.sandbox import namespace_isolation_available

    return {"host": socket.gethostname(), "mcgs": getattr(mcgs, "__version__", "?"), "namespaces": namespace_isolation_available()}


def _lost_kinds(ray) -> tuple[type, ...]:
    """Ray's errors that mean the machine or process running a task was lost."""
    ex = ray.exceptions
    names = ("WorkerCrashedError", "NodeDiedError", "OutOfMemoryError", "ObjectLostError", "OwnerDiedError",
             "LocalRayletDiedError", "RaySystemError", "ObjectFetchTimedOutError")
    return tuple(getattr(ex, n) for n in names if hasattr(ex, n))


class RayExecutor:
    """Runs each candidate as a Ray task (see the module docstring).

    Args:
        address: The cluster's address (``auto``, ``ray://host:10001``, ``host:6379``); None
            starts a Ray instance on this machine for the run and stops it at :meth:`close`.
        gpus: The run's ``--gpus`` setting: ``none`` never asks Ray for a GPU.
        memory_mb: A candidate's memory limit, MiB (asked of Ray as its ``memory`` resource).
        gpu_tasks: True when the task's programs train networks that use a GPU (image tasks).
        say: Where progress lines go.

    Raises:
        ExecutorError: Ray is not installed, no cluster answers at ``address``, or mcgs cannot
            be imported on its workers; the message says what to do.
    """

    name = "ray"

    def __init__(self, address: str | None = None, gpus: str = "auto", memory_mb: int | None = None, gpu_tasks: bool = False,
                 say=print):
        try:
            import ray
        except ImportError:
            raise ExecutorError(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from None
        self._ray = ray
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no call home from the engine's machine
        self._owns = address is None and not ray.is_initialized()
        if not ray.is_initialized():
            _check_reachable(address)
            try:
                kwargs = {"include_dashboard": False} if address is None else {}
                ray.init(address=address, namespace="mcgs", log_to_driver=False, configure_logging=False, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ExecutorError(f"could not reach a Ray cluster at {address!r}: {exc}; start one (ray start --head) and give "
                                    f"its address with --ray-address, or leave --ray-address out to run Ray on this machine") from None
        self._inputs: dict[Path, tuple[str, object]] = {}
        self._lock = threading.Lock()
        self._task = ray.remote(max_retries=0, retry_exceptions=False)(_ray_task)
        self._lost = _lost_kinds(ray)
        resources = ray.cluster_resources()
        machines = [n for n in ray.nodes() if n.get("Alive")]
        self.max_memory = max((n.get("Resources", {}).get("memory", 0) for n in machines), default=0)
        self.gpus_per_candidate = gpus_per_candidate(gpu_tasks, gpus, resources.get("GPU", 0))
        self.memory_bytes = None if memory_mb is None else int(memory_mb) * 2**20
        self._check_workers()
        say(f"Ray cluster{'' if address is None else ' at ' + address}: {len(machines)} machine(s), {resources.get('CPU', 0):g} CPU(s), "
            f"{resources.get('GPU', 0):g} GPU(s); each candidate is a Ray task")

    def _check_workers(self) -> None:
        """Run one small task: mcgs must import on the workers (else every candidate would fail)."""
        ray = self._ray
        try:
            info = ray.get(ray.remote(max_retries=0)(_probe).options(num_cpus=0).remote(), timeout=PROBE_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            raise ExecutorError(f"the Ray cluster ran no task within {PROBE_TIMEOUT_S:.0f} s; check that its machines are up "
                                f"(ray status)") from None
        except ray.exceptions.RayError as exc:
            raise ExecutorError(f"a Ray worker could not run mcgs: {str(exc).splitlines()[0]}; {INSTALL_HINT}") from None
        logger.info("Ray worker %s: mcgs %s, namespace sandbox %s", info["host"], info["mcgs"], info["namespaces"])

    def _input_ref(self, folder: Path) -> tuple[str, object]:
        """The input's key and its object reference, put into the object store once."""
        folder = Path(folder).resolve()
        with self._lock:
            if folder not in self._inputs:
                self._inputs[folder] = (input_key(folder), self._ray.put(pack_folder(folder)))
            return self._inputs[folder]

    def _options(self, job: Job) -> dict:
        opts: dict = {"num_cpus": max(1, job.limits.cpu_threads), "num_gpus": self.gpus_per_candidate}
        if self.memory_bytes:
            # no more than the largest machine offers, or the task would wait for ever
            opts["memory"] = min(self.memory_bytes, int(self.max_memory)) if self.max_memory else self.memory_bytes
        return opts

    def run(self, job: Job, cancel: threading.Event) -> ExecutionResult:
        """Run ``job`` as a Ray task and write its outputs into ``job.workspace``.

        Raises:
            CandidateLost: the task's worker or machine was lost, Ray killed it for memory, or no
                machine ran it within its limit and :data:`QUEUE_GRACE_S`.
        """
        ray = self._ray
        key, ref = self._input_ref(job.input_dir)
        shipped = ShippedRun(workspace=pack_folder(job.workspace, skip=("input",)), input_key=key, limits=job.limits, env=dict(job.env),
                             cancel_after_s=job.cancel_after_s, max_file_bytes=job.max_output_bytes,
                             max_total_bytes=int(job.limits.disk_mb * 2**20) if job.limits.disk_mb else 4 * job.max_output_bytes)
        task = self._task.options(**self._options(job)).remote(shipped, [ref])
        limit = min(t for t in (job.limits.timeout_s, job.cancel_after_s) if t is not None)
        deadline = time.monotonic() + limit + QUEUE_GRACE_S
        while not ray.wait([task], timeout=0.5)[0]:
            if cancel.is_set():
                return self._cancelled(task, "cancelled: the run is stopping")
            if time.monotonic() > deadline:
                ray.cancel(task, force=True)
                raise CandidateLost(f"no result from the Ray cluster {limit + QUEUE_GRACE_S:.0f} s after the candidate was submitted "
                                    f"(no machine with {self._options(job)} free?)")
        try:
            out = ray.get(task)
        except ray.exceptions.TaskCancelledError:
            return _cancelled_result("cancelled: the Ray task was cancelled")
        except self._lost as exc:
            raise CandidateLost(f"the Ray task was lost ({type(exc).__name__}): {_first_line(exc)}") from None
        except ray.exceptions.RayTaskError as exc:
            raise CandidateLost(f"the Ray task failed on its worker: {_first_line(exc)}") from None
        for line in out.refused + write_outputs(out.files, job.workspace):
            logger.info("node %d on %s: output not taken: %s", job.node_id, out.host, line)
        return out.result

    def _cancelled(self, task, why: str) -> ExecutionResult:
        """Cancel a running task (the worker's sandbox stops the program) and wait a little for it."""
        ray = self._ray
        ray.cancel(task)
        try:
            ray.get(task, timeout=CANCEL_WAIT_S)
        except Exception:  # cancelled, lost or still going: no verdict in any case
            pass
        return _cancelled_result(why)

    def close(self) -> None:
        """Disconnect from the cluster (stopping it when this executor started it)."""
        if self._ray.is_initialized():
            self._ray.shutdown()


def _check_reachable(address: str | None) -> None:
    """Refuse at once a ``host:port`` (or ``ray://host:port``) address where nothing listens:
    Ray itself retries for minutes before it gives up.

    Raises:
        ExecutorError: the connection is refused or times out (5 s).
    """
    import socket

    if not address or address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"--ray-address {address!r} is not HOST:PORT, ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ExecutorError(f"no Ray cluster answers at {address} ({exc.strerror or exc}); start one there (ray start --head "
                            f"--port {port}) or give its address with --ray-address") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def _cancelled_result(why: str) -> ExecutionResult:
    return ExecutionResult(outcome=Outcome.CANCELLED, returncode=None, runtime_s=0.0, stdout_tail="", stderr_tail="", error=why,
                           traceback_tail=None, peak_rss_mb=None)
