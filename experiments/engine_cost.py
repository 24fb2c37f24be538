"""The engine's own cost: what mcgs spends outside the candidate programs.

Three measurements, one run of this script:

1. **Selection time** at 1 000 / 10 000 / 100 000 nodes: synthetic search graphs (five drafts,
   then children attached to random earlier nodes, 85 % valid, random rewards and runtimes),
   the time of one :func:`mcgs.policy.select_expansion` (mean of a few calls, each on a freshly
   built graph, as the engine does), of deriving the structures it shares, and of building the
   graph from its nodes and edges, for the
   ``mcgs`` and ``tree`` policies; and the time to load that many nodes and edges from a SQLite
   storage (programs of 8 KB each), which the engine does before each selection. Target: under
   10 ms per selection at 10 000 nodes.
2. **Launch overhead per candidate**: the wall time of the sandbox running a program that does
   nothing (``import sys``), i.e. process tree start, limits, scrubbed environment, monitoring
   and teardown.
3. **Share of wall time outside candidates** in one real search (the bundled demo task, the
   recipe coder, one worker): ``1 - sum(candidate runtimes) / run wall time``. Target: under
   3 % at 10-minute runs. The demo's candidates take 2-3 s each, the worst case for this share;
   ``--task`` adds the same measurement on real tasks (each one more search of the budget).

Usage (from the repository root, after ``make install``; the second task folder is prepared
with ``mcgs mlebench prepare``)::

    .venv/bin/python experiments/engine_cost.py --work /tmp/mcgs-cost --time-budget 10m \\
        --task /tmp/mlebench/spaceship-titanic --report docs/results/engine_cost.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from mcgs.graph import build_graph
from mcgs.node import EdgeKind, FrozenEdge, FrozenNode, NodeState, Operator
from mcgs.policy import select_expansion
from mcgs.settings import SearchSettings, parse_duration
from mcgs.experience import without_experience

without_experience()  # reproducible: no experience store (mcgs.experience)


def synthetic_graph(n: int, seed: int = 0) -> tuple[list[FrozenNode], list[FrozenEdge]]:
    """``n`` nodes below a root: five drafts, then children of random earlier nodes."""
    rng = random.Random(seed)
    nodes = [FrozenNode(id=0, seq=0, parent_id=None, operator=Operator.ROOT, state=NodeState.ROOT)]
    edges = []
    for i in range(1, n + 1):
        parent = 0 if i <= 5 else rng.randint(1, i - 1)
        ok = rng.random() < 0.85
        op = Operator.DRAFT if parent == 0 else Operator.IMPROVE if ok else Operator.DEBUG
        nodes.append(FrozenNode(
            id=i, seq=i, parent_id=parent, operator=op, state=NodeState.VALID if ok else NodeState.BUGGY,
            score=rng.random() if ok else None, reward=(rng.random() + (rng.random() < 0.05)) if ok else -1.0, runtime_s=rng.uniform(1, 60),
        ))
        edges.append(FrozenEdge(src=parent, dst=i, kind=EdgeKind.DERIVES, operator=op))
    return nodes, edges


def selection_times(sizes: list[int], policies: list[str], steps: int = 20) -> list[dict]:
    """Per size and policy, milliseconds:

    * ``build_ms``: building the networkx graph whole and deriving the structures every
      selection shares (:func:`mcgs.graph._derived`): the engine's first step, and any step after
      the storage view had to read everything again;
    * ``first_select_ms``: the first selection on it (it fills the branch-best and visit caches);
    * ``update_ms`` and ``select_ms``: a step of a running search, mean over ``steps`` steps: one
      new in-flight node and one earlier node finishing (valid, with a reward) applied in place
      (:func:`mcgs.graph.update_graph`, which carries the caches forward), then one
      :func:`~mcgs.policy.select_expansion` at 20 % of the budget (explore phase) and one at
      60 % (``select_late_ms``: a share of selections then ranks the global top-K).
    """
    from mcgs.graph import _derived, update_graph
    from mcgs.run_graph import CACHE_UPDATERS

    rows = []
    for n in sizes:
        nodes, edges = synthetic_graph(n)
        for policy in policies:
            s = SearchSettings(policy=policy, time_budget_s=36000)
            t0 = time.perf_counter()
            g = build_graph(nodes, edges)
            _derived(g)
            t1 = time.perf_counter()
            select_expansion(g, s, progress=0.2, higher_is_better=True, rng=random.Random(0))
            t2 = time.perf_counter()
            rng = random.Random(1)
            update, select, late, in_flight = [], [], [], []
            for k in range(steps):
                nid = n + 1 + k
                parent = rng.randint(1, n)
                changed = [FrozenNode(id=nid, seq=nid, parent_id=parent, operator=Operator.IMPROVE, state=NodeState.PENDING)]
                # two workers: the older in-flight node finishes, every other step with a new best
                # (reward above 1), so the mcgs policy is not always globally stagnant (Aggregate)
                if len(in_flight) == 2:
                    done = in_flight.pop(0)
                    changed.append(FrozenNode(id=done.id, seq=done.seq, parent_id=done.parent_id, operator=done.operator,
                                              state=NodeState.VALID, score=rng.random(), reward=rng.random() + (k % 2), runtime_s=rng.uniform(1, 60)))
                in_flight.append(changed[0])
                ta = time.perf_counter()
                assert update_graph(g, changed, [FrozenEdge(src=parent, dst=nid, kind=EdgeKind.DERIVES, operator=Operator.IMPROVE)], CACHE_UPDATERS) == []
                tb = time.perf_counter()
                select_expansion(g, s, progress=0.2, higher_is_better=True, rng=random.Random(k))
                tc = time.perf_counter()
                select_expansion(g, s, progress=0.6, higher_is_better=True, rng=random.Random(k))
                td = time.perf_counter()
                update.append(tb - ta)
                select.append(tc - tb)
                late.append(td - tc)
            ms = lambda xs: round(1000 * statistics.mean(xs), 2)  # noqa: E731
            rows.append({"nodes": n, "policy": policy, "build_ms": round(1000 * (t1 - t0), 1), "first_select_ms": round(1000 * (t2 - t1), 1),
                         "update_ms": ms(update), "select_ms": ms(select), "select_late_ms": ms(late)})
            print(rows[-1], flush=True)
    return rows


def storage_load_times(work: Path, sizes: list[int], code_bytes: int = 8192) -> list[dict]:
    """Milliseconds to read every node and edge of a run of each size from SQLite storage
    (``Storage.get_nodes`` + ``get_edges``), nodes carrying ``code_bytes`` of program text."""
    from sqlalchemy import insert

    from mcgs.storage import Storage
    from mcgs.storage.models import EdgeModel, NodeModel

    rows = []
    for n in sizes:
        path = work / f"load-{n}.db"
        path.unlink(missing_ok=True)
        st = Storage(f"sqlite:///{path}")
        run = st.create_run(name=f"load-{n}", task_json="{}", settings={}, seed=0, data_fingerprint="", package_versions={}, isolation="none")
        root = st.get_nodes(run.id)[0].id
        nodes, edges = synthetic_graph(n)
        code = "x" * code_bytes
        with st._session.begin() as s:  # bulk insert: the engine's own add_node is one transaction per node
            s.execute(insert(NodeModel), [
                {"id": root + fn.id, "run_id": run.id, "seq": fn.seq, "parent_id": root + fn.parent_id, "operator": fn.operator.value,
                 "state": fn.state.value, "depth": 1, "code": code, "score": fn.score, "reward": fn.reward, "runtime_s": fn.runtime_s}
                for fn in nodes[1:]
            ])
            s.execute(insert(EdgeModel), [
                {"run_id": run.id, "src_id": root + e.src, "dst_id": root + e.dst, "kind": e.kind.value, "operator": e.operator.value}
                for e in edges
            ])
        t0 = time.perf_counter()
        got = st.get_nodes(run.id), st.get_edges(run.id)
        ms = 1000 * (time.perf_counter() - t0)
        assert len(got[0]) == n + 1
        view = st.run_view(run.id)
        view.refresh()
        version, n_edges = view.version, view.edge_count
        # one new node, as after a step; then what the search's graph() does: refresh the view
        # and read what changed
        st.add_node(run.id, parent_id=root + 1, operator=nodes[1].operator, plan="", code=code)
        t0 = time.perf_counter()
        view.refresh()
        changed, new_edges = view.changes_since(version, n_edges)
        view_ms = 1000 * (time.perf_counter() - t0)
        assert len(changed) == 1 and len(new_edges) == 1 and view.full_reads == 1
        st.close()
        path.unlink(missing_ok=True)
        rows.append({"nodes": n, "load_ms": round(ms, 1), "refresh_ms": round(view_ms, 1)})
        print(rows[-1], flush=True)
    return rows


def launch_overhead(work: Path, runs: int = 20) -> float:
    """Mean wall seconds of the sandbox running a program that does nothing."""
    from mcgs.sandbox import SandboxLimits, run_program

    ws = work / "noop"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "solution.py").write_text("import sys\n")
    limits = SandboxLimits(timeout_s=60, memory_mb=2048, cpu_threads=1)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        run_program(ws, "solution.py", limits)
        times.append(time.perf_counter() - t0)
    return statistics.mean(times)


def outside_share(work: Path, budget_s: float, task: Path | None = None) -> dict:
    """One search (the bundled demo task, or ``task``: an mcgs task folder or a prepared
    MLE-bench competition): wall time, candidate time, the share outside candidates, and where
    that time went (from the nodes' stored timestamps; one worker, so the phases do not overlap)."""
    from mcgs.demo import build_demo_task
    from mcgs.search import create_search

    if task is None:
        task = build_demo_task(work / "demo" / "task") if not (work / "demo" / "task" / "task.yaml").is_file() else work / "demo" / "task"
        label = "demo"
    else:
        label = task.name
    run = work / label / f"run-{int(time.time())}"
    t0, start = time.perf_counter(), dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    search = create_search(task, run, settings=SearchSettings(time_budget_s=budget_s, seed=0, coder="recipe"))
    search.run()
    wall = time.perf_counter() - t0
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    cand = sum(n.runtime_s or 0.0 for n in nodes)
    screen = sum(p.get("runtime_s") or 0.0 for p in _screen_plans(run))
    return {"task": label, "wall_s": round(wall, 1), "candidate_s": round(cand, 1), "screening_s": round(screen, 1), "nodes": len(nodes),
            "outside_share": round(1 - (cand + screen) / wall, 4), "phases": phases(run / "mcgs.db", start, wall, screen)}


def phases(db: Path, start: dt.datetime, wall_s: float, screening_s: float) -> dict[str, float]:
    """Seconds of a one-worker run by phase, from the nodes' created / started / finished
    timestamps (UTC) and runtimes:

    * ``before the first node``: task loading, profile and draft-plan screening (minus the
      screening candidates' own time) up to the first node's creation;
    * ``select, write, review``: from a node's verdict to the next node's creation (it also
      holds the verdict's follow-up: ``best/`` export, progress, in-search ensembles);
    * ``workspace``: creation to start (copying the inputs into the node's folder);
    * ``candidates``: the programs' runtimes (sandbox start and teardown included);
    * ``score, store``: start + runtime to the stored verdict (reading and scoring the OOF
      predictions, the reward);
    * ``after the last node``: the last verdict to the end of ``run()`` (export, report files).
    """
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("select created_at, started_at, finished_at, runtime_s from nodes where parent_id is not null "
                       "and started_at is not null and finished_at is not null order by created_at").fetchall()
    con.close()
    ts = [(dt.datetime.fromisoformat(c), dt.datetime.fromisoformat(s), dt.datetime.fromisoformat(f), r or 0.0) for c, s, f, r in rows]
    out = {"before the first node": 0.0, "select, write, review": 0.0, "workspace": 0.0, "candidates": 0.0, "score, store": 0.0,
           "after the last node": 0.0}
    if not ts:
        return out
    out["before the first node"] = (ts[0][0] - start).total_seconds() - screening_s
    prev = None
    for c, st, f, r in ts:
        if prev is not None:
            out["select, write, review"] += max(0.0, (c - prev).total_seconds())
        out["workspace"] += (st - c).total_seconds()
        out["candidates"] += r
        out["score, store"] += max(0.0, (f - st).total_seconds() - r)
        prev = f
    out["after the last node"] = wall_s - (prev - start).total_seconds()
    return {k: round(v, 2) for k, v in out.items()}


def _screen_plans(run: Path) -> list[dict]:
    import json

    path = run / "screen" / "plans.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else data.get("plans", [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--time-budget", default="10m", help="budget of the demo search for the outside-candidates share")
    ap.add_argument("--task", type=Path, action="append", default=[],
                    help="also measure the outside-candidates share on this task (mcgs task folder or prepared MLE-bench competition); repeatable")
    ap.add_argument("--report", type=Path)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sel = selection_times(args.sizes, ["mcgs", "tree"])
    loads = {r["nodes"]: r for r in storage_load_times(args.work, args.sizes)}
    launch = launch_overhead(args.work)
    print({"launch_overhead_s": round(launch, 3)}, flush=True)
    shares = []
    for task in [None, *args.task]:
        shares.append(outside_share(args.work, parse_duration(args.time_budget), task))
        print(shares[-1], flush=True)
    if args.report:
        date = dt.datetime.now().isoformat(timespec="seconds")
        lines = [
            f"# Engine cost ({date})", "",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores. Command: `{' '.join(sys.argv)}`", "",
            "## Selection (synthetic graphs)", "",
            "Per step the engine refreshes its view of storage, reads what changed, applies it to its graph in place "
            "(`mcgs.graph.update_graph`, which carries the branch bests and visit statistics forward) and selects. A step "
            "of a running search is that whole sequence (last column); the graph is built whole only on the first step "
            "and after the view had to read every row again (a full read, then build and first selection: the columns "
            "marked *whole*). Steps: mean of 20, each after one new in-flight node and one node finishing.", "",
            "| nodes | policy | *whole*: full read from storage (ms) | *whole*: build graph + derive (ms) | *whole*: first selection (ms) | "
            "refresh + read changes (ms) | update in place (ms) | selection, explore phase (ms) | selection at 60 % of the budget (ms) | "
            "step: refresh + update + selection (ms) |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *[f"| {r['nodes']} | {r['policy']} | {loads[r['nodes']]['load_ms']} | {r['build_ms']} | {r['first_select_ms']} | "
              f"{loads[r['nodes']]['refresh_ms']} | {r['update_ms']} | {r['select_ms']} | {r['select_late_ms']} | "
              f"{loads[r['nodes']]['refresh_ms'] + r['update_ms'] + max(r['select_ms'], r['select_late_ms']):.1f} |"
              for r in sel],
            "", "The step column takes the slower of the two selections.",
            "", "## Launch overhead", "",
            f"Sandbox run of a program that does nothing: {launch * 1000:.0f} ms per candidate (mean of 20).", "",
            "## Share of wall time outside candidate programs (one worker)", "",
            "| task | budget | wall (s) | candidates (s) | screening (s) | nodes | mean candidate (s) | outside candidates |",
            "|---|---|---|---|---|---|---|---|",
            *[f"| {sh['task']} | {args.time_budget} | {sh['wall_s']} | {sh['candidate_s']} | {sh['screening_s']} | {sh['nodes']} | "
              f"{sh['candidate_s'] / max(sh['nodes'], 1):.1f} | {100 * sh['outside_share']:.1f} % |" for sh in shares],
            "", "Where the wall time went (seconds and share of each run's wall; from the nodes' timestamps, see `phases()`):", "",
            "| phase | " + " | ".join(sh["task"] for sh in shares) + " |", "|---|" + "---|" * len(shares),
            *[f"| {k} | " + " | ".join(f"{sh['phases'][k]} ({100 * sh['phases'][k] / sh['wall_s']:.2f} %)" for sh in shares) + " |"
              for k in shares[0]["phases"]],
            "| screening candidates | " + " | ".join(f"{sh['screening_s']} ({100 * sh['screening_s'] / sh['wall_s']:.2f} %)" for sh in shares) + " |",
        ]
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
