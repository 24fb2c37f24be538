"""What ``mcgs status`` shows, as rich renderables built from storage alone, so the same view
serves a finished run, a stopped one and (with ``--watch``) one that another process runs."""

from __future__ import annotations

from collections import Counter, defaultdict

from rich.console import Group
from rich.table import Table
from rich.text import Text

__all__ = ["status_view", "spend_view"]

TOP_K = 5


def _table(title: str) -> Table:
    """A table whose title stays on one line: rich wraps a title to the table's width, and a
    table of two narrow columns is narrower than its title."""
    return Table(title=title, title_justify="left", min_width=len(title) + 4)


def _lineage(best, by_id) -> str:
    chain = []
    node = best
    while node is not None and node.parent_id is not None:
        chain.append(f"{node.operator.value} {node.seq}")
        node = by_id.get(node.parent_id)
    return " → ".join(reversed(chain))


def status_view(snap) -> Group:
    """The status of a run from its snapshot (:func:`mcgs.snapshot.load_run`): budget, the
    chosen node, the best single node and its lineage, nodes by operator and state, the top
    nodes, nodes in flight and their workers, isolation, coder and LLM spend."""
    run = snap.record
    by_id = snap.by_id
    nodes = snap.search_nodes
    task = snap.task
    parts: list = []

    budget = snap.settings.time_budget_s
    gone = snap.engine_gone
    spent = snap.spent_s
    head = Text.assemble(
        ("run ", "bold"), (str(snap.run_dir), "bold cyan"),
        "  stopped (its engine is gone: killed?)  " if gone else f"  {run.status}  ",
        f"budget {spent:.0f} s of {budget:.0f} s ({min(100.0, 100 * spent / budget):.0f} %)  ",
        f"metric {task.metric} ({'higher' if task.higher_is_better else 'lower'} is better)",
    )
    parts.append(head)
    if gone:
        parts.append(Text(f"no process is searching this run any more (it was stored as {run.status}); continue it with "
                          f"`mcgs resume RUN_DIR` (nodes left running are queued again)", style="yellow"))

    t = _table("nodes by operator and state")
    t.add_column("operator")
    states = sorted({n.state.value for n in nodes})
    for s in states:
        t.add_column(s, justify="right")
    counts = Counter((n.operator.value, n.state.value) for n in nodes)
    for op in sorted({n.operator.value for n in nodes}):
        t.add_row(op, *[str(counts.get((op, s), 0)) for s in states])
    parts.append(t)

    best = snap.chosen_node
    if best:
        nested = best.config.get("nested_score")
        honest = (f"; cross-fitted {float(nested):.6f} (the OOF score above is optimistic: the ensemble's weights were fitted on those rows)"
                  if nested is not None else "")
        parts.append(Text(f"chosen {task.metric}: {best.score:.6f} (node {best.seq}, {best.operator.value}){honest}; "
                          f"elapsed {spent:.0f}s of {budget:.0f}s"))
        single = snap.best_single_node
        if single is not None:
            parts.append(Text(f"best single node {single.seq}: {task.metric} {single.score:.6f}; lineage: {_lineage(single, by_id)}"))
    valid = sorted((n for n in nodes if n.is_valid and n.full_fidelity), key=lambda n: n.score, reverse=task.higher_is_better)[:TOP_K]
    if valid:
        top = _table(f"top {len(valid)} nodes (OOF {task.metric}; an ensemble's cross-fitted score in brackets)")
        for col in ("node", "operator", task.metric, "runtime (s)", "memory", "plan"):
            top.add_column(col, justify="right" if col in ("node", task.metric, "runtime (s)", "memory") else "left")
        for n in valid:
            nested = n.config.get("nested_score")
            score = f"{n.score:.6g}" + (f" ({float(nested):.6g})" if nested is not None else "")
            top.add_row(str(n.seq), n.operator.value, score, f"{n.runtime_s or 0:.1f}", _memory(n),
                        Text((n.plan or "")[:90], overflow="ellipsis", no_wrap=True))
        parts.append(top)
        gpu_nodes = [n for n in nodes if n.gpu is not None]
        if gpu_nodes:
            peak = max((n.peak_gpu_mb or 0.0) for n in gpu_nodes)
            parts.append(Text(f"GPUs: {len(gpu_nodes)} node(s) ran on GPU {', '.join(sorted({str(n.gpu) for n in gpu_nodes}))}; "
                              f"the most GPU memory one held: {peak / 1024:.1f} GiB"))

    running = [n for n in nodes if n.state.value in ("running", "pending") and n.owner]
    queued = sum(1 for n in nodes if n.state.value == "pending" and not n.owner)
    retried = sum(1 for n in nodes if n.attempts > 1)
    if running or queued or retried:
        parts.append(Text(
            (f"left running by the lost engine or its workers: {len(running)} node(s) (queued again on resume); {queued} queued" if gone else
             f"in flight: {len(running)} node(s) on {len({n.owner for n in running})} worker(s); {queued} queued")
            + (f"; {retried} node(s) rerun after their worker was lost" if retried else "")
        ))
    iso = run.isolation
    parts.append(Text(f"isolation of the candidates: {iso}" + (
        " (bubblewrap: no network, only their workspace writable)" if iso == "namespaces" else " (limits and a scrubbed environment; no bubblewrap)")))
    if snap.settings.executor != "local":
        parts.append(Text(f"executor: {snap.settings.executor}" + (f" at {snap.settings.ray_address}" if snap.settings.ray_address else
                                                                    " (started on the engine's machine)")))
    parts.append(Text(f"coder: {snap.settings.coder}"))
    parts.append(Text(experience_line(snap.run_dir)))
    parts.extend(spend_view(snap))
    return Group(*parts)


def experience_line(run_dir) -> str:
    """Which earlier runs the run started from (``RUN_DIR/experience.json``: :mod:`mcgs.experience`)."""
    import json
    from pathlib import Path

    path = Path(run_dir) / "experience.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return "experience: none used (no store, or the run began without one)"
    runs = data.get("experience", {}).get("runs", [])
    if not runs:
        return f"experience: none on similar data in {data.get('store')} when the run began (its own nodes are added at its end)"
    fams = ", ".join(list(data["experience"].get("family_ranks", {}))[:3])
    return f"experience: started from {len(runs)} earlier run(s) on similar data in {data.get('store')} (drafts first: {fams})"


def _memory(n) -> str:
    """A node's peak memory for the tables: RAM, and GPU memory with its GPU when it had one."""
    ram = f"{n.peak_rss_mb / 1024:.1f} GiB" if n.peak_rss_mb else "-"
    return ram + (f", GPU {n.gpu}: {(n.peak_gpu_mb or 0) / 1024:.1f} GiB" if n.gpu is not None else "")


def spend_view(snap) -> list:
    """LLM spend by operator and model (from the cost ledger of a run's snapshot,
    :func:`mcgs.snapshot.load_run`), and who wrote the nodes; empty when the run made no LLM
    call."""
    nodes = snap.search_nodes
    calls = snap.llm_calls
    if not calls:
        return []
    from mcgs.settings import format_usd

    refused = [c for c in calls if c.outcome == "budget"]  # never sent: not calls
    sent = [c for c in calls if c.outcome != "budget"]
    agg: dict = defaultdict(lambda: [0, 0, 0, 0, 0, 0.0])
    for c in sent:
        a = agg[(c.operator, c.model)]
        a[0] += 1
        a[1] += c.input_tokens
        a[2] += c.cache_write_tokens
        a[3] += c.cache_read_tokens
        a[4] += c.output_tokens
        a[5] += c.cost_usd
    t = _table("LLM spend (cost ledger)")
    for col in ("operator", "model", "calls", "input", "cache write", "cache read", "output", "USD"):
        t.add_column(col, justify="left" if col in ("operator", "model") else "right")
    for (op, model), a in sorted(agg.items()):
        t.add_row(op, model, *(str(x) for x in a[:5]), f"{a[5]:.4f}")
    t.add_row("total", "", str(len(sent)), *(str(sum(a[i] for a in agg.values())) for i in range(1, 5)), f"{sum(a[5] for a in agg.values()):.4f}")
    out: list = [t]
    limit = snap.settings.llm.max_cost_usd
    if limit is not None:
        out.append(Text(f"LLM budget: {format_usd(sum(c.cost_usd for c in calls))} of {format_usd(limit)}"
                        + (f"; {len(refused)} call(s) not made because the budget could not cover them" if refused else "")))
    authors = Counter(n.config.get("author", "recipe") for n in nodes if n.operator.value != "ensemble")
    out.append(Text("nodes written by: " + ", ".join(f"{a} ({k})" for a, k in authors.most_common())))
    reviews = Counter(n.review["model_review"].get("verdict") for n in nodes if isinstance(n.review, dict) and n.review.get("model_review"))
    if reviews:
        review_usd = sum(c.cost_usd for c in calls if c.kind == "review")
        words = {"pass": "passed", "revise": "revised (the revision ran)", "unavailable": "unavailable (ran on the static review)"}
        out.append(Text("code review by the model: " + ", ".join(f"{k} {words.get(v, v)}" for v, k in reviews.most_common())
                        + f"; {format_usd(review_usd)}"))
    return out
