"""A candidate on a busy machine: its slowdown under one competing CPU-bound process.

Losing one of two cores to another process should make a candidate about 2x slower. OpenMP
programs (LightGBM, XGBoost, BLAS) that keep as many threads as the machine has cores, and
spin while they wait at a barrier, slow down far more: each parallel region waits for its
slowest thread, which shares a core with the competitor. This runs the recipe coder's default
LightGBM program for one task of the public suite in the sandbox, alone and beside a busy
loop, with the thread settings below, and reports each run time and its ratio to the run alone
with the engine's settings.

Conditions:
* ``alone``: the machine to itself, two threads (as the engine gives them there);
* ``alone, passive``: the same with ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep at barriers
  instead of spinning first): what sleeping costs on an idle machine;
* ``busy, 2 threads``: one competing process, two threads (the engine before issue 33);
* ``busy, 2 threads, passive``: the same with ``OMP_WAIT_POLICY=PASSIVE``;
* ``busy, threads from free cores``: the thread count the engine derives from the cores free
  (:func:`mcgs.sandbox.free_cores`).

Usage (from the repository root, on an otherwise idle machine; the suite built by
experiments/suite.py)::

    .venv/bin/python experiments/busy_machine.py --suite /tmp/mcgs-suite --task bird_strike_phase \\
        --work /tmp/mcgs-busy --repeats 2 --limit 600 --report docs/results/busy_machine.md
"""

from __future__ import annotations

import argparse
import os
import signal
import platform
import statistics
import sys
import time
from pathlib import Path


def _start_competitor() -> int:
    """A CPU-bound competitor outside this process's tree (its parent shell exits at once), as
    another user's job is: one core busy until killed. Returns its pid."""
    import subprocess

    spin = "x = 0\nwhile True: x += 1\n"
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c '{spin}' >/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def _workspace(suite: Path, task: str, work: Path):
    from mcgs.coders.recipe_config import default_config, render_program
    from mcgs.contract import prepare_run_input
    from mcgs.profile import profile_task
    from mcgs.task import load_task

    spec = load_task(suite / "tasks" / task)
    profile = profile_task(spec)
    code, _ = render_program(default_config("model.lightgbm", profile) | {"seed": 0}, title="busy machine", plan="default", profile=profile)
    return prepare_run_input(spec, work / "run"), code


def run_once(inp: Path, code: str, work: Path, threads: int, env: dict[str, str], limit_s: float) -> float:
    """Wall seconds of one sandboxed run of ``code``; ``inf`` when it passed ``limit_s``."""
    from mcgs.contract import prepare_workspace
    from mcgs.sandbox import Outcome, SandboxLimits, resolve_isolation, run_program

    ws = prepare_workspace(inp, work / f"ws_{time.monotonic_ns()}", code)
    limits = SandboxLimits(timeout_s=limit_s, memory_mb=8192, cpu_threads=threads, isolation=resolve_isolation("auto"))
    start = time.monotonic()
    result = run_program(ws, "solution.py", limits, extra_env=env)
    if result.outcome is Outcome.TIMEOUT:
        return float("inf")
    if result.outcome is not Outcome.OK:
        raise SystemExit(f"the program failed ({result.outcome.value}): {result.error}")
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    from mcgs.sandbox import free_cores

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path, required=True)
    parser.add_argument("--task", default="bird_strike_phase")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--limit", type=float, default=600.0, help="Seconds after which a run is stopped and reported as longer.")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args(argv)
    inp, code = _workspace(args.suite, args.task, args.work)
    passive = {"OMP_WAIT_POLICY": "PASSIVE"}
    rows = []

    def measure(label: str, busy: bool, threads, env) -> None:
        competitor = _start_competitor() if busy else None
        times, used = [], []
        try:
            if competitor:
                time.sleep(3)  # let the scheduler see it
            for _ in range(args.repeats):
                n = threads() if callable(threads) else threads
                used.append(n)
                times.append(run_once(inp, code, args.work, n, env, args.limit))
        finally:
            if competitor:
                os.kill(competitor, signal.SIGKILL)
        rows.append((label, used[0], statistics.median(times)))
        print(f"{label}: {used} threads, {[round(t, 1) for t in times]} s", flush=True)

    measure("alone, 2 threads", False, 2, {})
    measure("alone, 2 threads, passive", False, 2, passive)
    measure("busy, 2 threads (the engine before issue 33)", True, 2, {})
    measure("busy, 2 threads, passive", True, 2, passive)
    measure("busy, threads from the free cores (the engine now)", True, lambda: max(1, min(2, free_cores())), {})
    base = rows[0][2]
    if args.report:
        lines = [
            "# A candidate on a busy machine", "",
            f"The recipe coder's default LightGBM program on the suite task `{args.task}`, run in the sandbox, "
            f"alone and beside one CPU-bound process (a Python busy loop); median of {args.repeats} runs each. "
            f"Machine: {platform.machine()}, {os.cpu_count()} cores.", "",
            f"Command: `python experiments/busy_machine.py --suite SUITE --task {args.task} --work WORK --repeats {args.repeats} "
            f"--limit {args.limit:.0f} --report {args.report}`", "",
            "| condition | threads | run time (s) | slowdown |", "|---|---|---|---|",
        ]
        lines += [f"| {label} | {n} | {t:.1f} | {t / base:.2f}x |" if t != float("inf") else
                  f"| {label} | {n} | > {args.limit:.0f} (stopped) | > {args.limit / base:.0f}x |" for label, n, t in rows]
        args.report.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
