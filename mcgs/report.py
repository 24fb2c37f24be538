"""``mcgs report``: one self-contained HTML file describing a run, drawn from its storage alone
(a frozen :class:`~mcgs.snapshot.RunSnapshot`: no engine is started and nothing is written but
the report).

The file holds the search graph (nodes coloured by state, shaped by operator, edges drawn by
kind; clicking a node shows its plan, program, diff to its primary parent, output tails, score,
runtime and LLM cost), the best-so-far score over time, and a table of all nodes. Charts are
plotly figures with plotly.js inlined, so the file opens without a network.

A run of more than :data:`FULL_DETAIL_NODES` nodes embeds the program, diff and log tails only
of the nodes a reader looks at (the best :data:`FULL_DETAIL_TOP`, the chosen node with its
ensemble members and their primary ancestors, and the newest :data:`FULL_DETAIL_NEWEST`); the
others show what their table row holds (the plan's start among it), their error, and a link to
their folder: at 5 000 nodes the file is under 10 MiB instead of 130 (``experiments/report_scale.py``).
"""

from __future__ import annotations

import difflib
import html
import json
from pathlib import Path
from typing import Any

from mcgs.direction import best_first

__all__ = ["render_report", "write_report", "FULL_DETAIL_NODES"]

#: Runs with at most this many nodes embed every node's program, diff and logs.
FULL_DETAIL_NODES = 300
#: In larger runs, the best valid nodes that do (by score, ensembles included).
FULL_DETAIL_TOP = 30
#: ... and the newest nodes that do.
FULL_DETAIL_NEWEST = 20
#: Characters of an error kept for the other nodes (their plan is the table's first 140).
BRIEF_CHARS = 240

STATE_COLOURS = {
    "valid": "#2ca02c", "buggy": "#d62728", "timeout": "#ff7f0e", "oom": "#8c564b", "disk": "#8c6d31", "process_limit": "#843c39",
    "invalid_output": "#e377c2",
    "rejected": "#7f7f7f", "interrupted": "#bcbd22", "running": "#1f77b4", "pending": "#17becf", "root": "#000000",
}
OPERATOR_SYMBOLS = {
    "root": "star", "draft": "circle", "debug": "x", "improve": "triangle-up", "evolve": "diamond",
    "fusion": "hexagon", "aggregate": "hexagram", "ensemble": "square",
}
EDGE_STYLES = {  # kind -> (colour, dash)
    "derives": ("#555555", "solid"), "fuses": ("#9467bd", "dash"), "references": ("#17becf", "dot"), "ensembles": ("#ff7f0e", "dashdot"),
}


def _layout(nodes, edges) -> dict[int, tuple[float, float]]:
    """Node positions for drawing the primary-parent tree: ``y = -depth``; leaves take
    consecutive ``x`` in depth-first order and a parent sits above the mean of its children
    (the idea of Reingold and Tilford's tidy trees, without their compaction)."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(n.id for n in nodes)
    g.add_edges_from((e.src, e.dst) for e in edges if e.kind.value == "derives")
    depth = {n.id: n.depth for n in nodes}
    roots = [n.id for n in nodes if n.parent_id is None]
    x: dict[int, float] = {}
    next_leaf = 0.0
    for root in roots:
        for v in nx.dfs_postorder_nodes(g, root):
            kids = [c for c in g.successors(v) if c in x]
            if kids:
                x[v] = sum(x[c] for c in kids) / len(kids)
            else:
                x[v] = next_leaf
                next_leaf += 1.0
    for n in nodes:  # anything unreachable from a root (should not happen) goes to the right
        if n.id not in x:
            x[n.id] = next_leaf
            next_leaf += 1.0
    return {i: (x[i], -float(depth[i])) for i in x}


def _node_costs(snap) -> dict[int, float]:
    costs: dict[int, float] = {}
    for call in snap.llm_calls:
        if call.node_seq is not None:
            costs[call.node_seq] = costs.get(call.node_seq, 0.0) + call.cost_usd
    return costs


def _full_detail_ids(snap, nodes) -> set[int] | None:
    """Ids of the nodes whose program, diff and logs the report embeds; None for all of them
    (a run of at most :data:`FULL_DETAIL_NODES` nodes)."""
    if len(nodes) <= FULL_DETAIL_NODES:
        return None
    by_id = {n.id: n for n in nodes}
    valid = sorted((n for n in nodes if n.is_valid), key=lambda n: (best_first(n.score, snap.task.higher_is_better), n.seq))
    keep = {n.id for n in valid[:FULL_DETAIL_TOP]}
    keep |= {n.id for n in sorted(nodes, key=lambda n: -n.seq)[:FULL_DETAIL_NEWEST]}
    chosen = [snap.chosen_node, snap.best_node]
    for n in list(chosen):
        if n is not None and n.operator.value == "ensemble":
            chosen += [by_id[int(i)] for i in n.config.get("weights", {}) if int(i) in by_id]
    for n in chosen:  # with their primary ancestors: the lineage a reader follows
        while n is not None:
            keep.add(n.id)
            n = by_id.get(n.parent_id) if n.parent_id is not None else None
    return keep


def _details(snap, nodes) -> dict[str, dict[str, Any]]:
    by_id = {n.id: n for n in nodes}
    costs = _node_costs(snap)
    full = _full_detail_ids(snap, nodes)
    out = {}
    for n in nodes:
        parent = by_id.get(n.parent_id) if n.parent_id is not None else None
        if full is not None and n.id not in full:
            # the table row holds its number, parent, operator, state, score, reward, runtime and the
            # start of its plan (the panel reads them there); here only what the row lacks
            out[str(n.seq)] = {"brief": 1, "error": _brief(n.error or ""), "cost_usd": round(costs.get(n.seq, 0.0), 6), "attempts": n.attempts}
            continue
        diff = ""
        if parent is not None and parent.code and n.code:
            diff = "".join(difflib.unified_diff(parent.code.splitlines(True), n.code.splitlines(True),
                                                f"node {parent.seq}", f"node {n.seq}", n=2))
        out[str(n.seq)] = {
            "seq": n.seq, "operator": n.operator.value, "state": n.state.value, "score": n.score, "reward": n.reward,
            "runtime_s": n.runtime_s, "parent": parent.seq if parent else None, "plan": n.plan, "code": n.code,
            "diff": diff, "error": n.error or "", "stdout": n.stdout_tail, "stderr": n.stderr_tail,
            "cost_usd": round(costs.get(n.seq, 0.0), 6), "attempts": n.attempts,
            "review": n.review.get("reasons", []) if isinstance(n.review, dict) else [],
            "model_review": _model_review(n),
        }
    return out


def _model_review(n) -> dict[str, Any] | None:
    """The Code Review operator's model review of a node (verdict, problems, the revision's
    diff), or None."""
    review = n.review.get("model_review") if isinstance(n.review, dict) else None
    if not isinstance(review, dict):
        return None
    return {k: review.get(k) for k in ("verdict", "problems", "diff", "model", "error") if review.get(k)}


def _brief(text: str) -> str:
    return text if len(text) <= BRIEF_CHARS else text[: BRIEF_CHARS - 3] + "..."


def _graph_figure(snap, nodes, edges):
    import plotly.graph_objects as go

    pos = _layout(nodes, edges)
    by_id = {n.id: n for n in nodes}
    fig = go.Figure()
    for kind, (colour, dash) in EDGE_STYLES.items():
        xs: list[float | None] = []
        ys: list[float | None] = []
        for e in edges:
            if e.kind.value == kind and e.src in pos and e.dst in pos:
                xs += [pos[e.src][0], pos[e.dst][0], None]
                ys += [pos[e.src][1], pos[e.dst][1], None]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=f"edge: {kind}", hoverinfo="skip",
                                     line=dict(color=colour, dash=dash, width=1.2)))
    metric = snap.task.metric
    for state in sorted({n.state.value for n in nodes}):
        group = [n for n in nodes if n.state.value == state]
        fig.add_trace(go.Scatter(
            x=[pos[n.id][0] for n in group], y=[pos[n.id][1] for n in group], mode="markers", name=f"node: {state}",
            marker=dict(size=14, color=STATE_COLOURS.get(state, "#333333"), symbol=[OPERATOR_SYMBOLS.get(n.operator.value, "circle") for n in group],
                        line=dict(width=1, color="#222222")),
            customdata=[n.seq for n in group],
            text=[f"node {n.seq} · {n.operator.value} · {state}" + (f" · {metric} {n.score:.5g}" if n.score is not None else "") for n in group],
            hovertemplate="%{text}<extra></extra>",
        ))
    best = snap.best_node
    if best is not None and best.id in by_id:
        fig.add_annotation(x=pos[best.id][0], y=pos[best.id][1], text="best", showarrow=True, arrowhead=2, ay=-30)
    fig.update_layout(autosize=True, margin=dict(l=20, r=20, t=30, b=20), clickmode="event",
                      xaxis=dict(visible=False), yaxis=dict(visible=False, title="depth"), legend=dict(orientation="h"))
    return fig


def _progress_figure(snap):
    import plotly.graph_objects as go

    from mcgs.plots import best_so_far

    points = best_so_far(snap.nodes, snap.task.higher_is_better)
    fig = go.Figure()
    if points:
        fig.add_trace(go.Scatter(x=[t for t, _ in points], y=[s for _, s in points], mode="lines+markers", line_shape="hv",
                                 name="best so far"))
    fig.update_layout(autosize=True, margin=dict(l=50, r=20, t=30, b=40), xaxis_title="seconds since the first node",
                      yaxis_title=f"{snap.task.metric} ({'higher' if snap.task.higher_is_better else 'lower'} is better)")
    return fig


def _forecast_figure(snap) -> tuple[Any, str] | None:
    """A forecasting run's forecast, from what the engine wrote into ``best/``: ``(figure,
    caption)`` or None (not a forecast, or no forecast written yet).

    A real forecast (``best/submission.csv``) is drawn after the history's last rows; a backtest
    (``best/test_forecast.npy`` with ``test_score.json``) shows its last test window beside the
    true values, scaled as the task scores them. At most four target series are drawn."""
    import numpy as np
    import pandas as pd
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    f = snap.task.forecast
    if f is None:
        return None
    best = Path(snap.run_dir) / "best"
    shown = f.targets[:4]
    frame = pd.read_csv(Path(snap.task.data_dir) / f.file, usecols=[f.time, *f.inputs])
    fig = make_subplots(rows=len(shown), cols=1, shared_xaxes=False, subplot_titles=shown, vertical_spacing=0.08)
    tail = 3 * f.horizon
    if (best / "submission.csv").is_file():
        future = pd.read_csv(best / "submission.csv")
        past = frame.tail(tail)
        for i, col in enumerate(shown, start=1):
            fig.add_trace(go.Scatter(x=past[f.time], y=past[col], name="history", line={"color": "#555"}, showlegend=i == 1), row=i, col=1)
            fig.add_trace(go.Scatter(x=future[f.time], y=future[col], name="forecast", line={"color": "#d62728"}, showlegend=i == 1),
                          row=i, col=1)
        caption = f"The forecast of the next {f.horizon} steps (best/submission.csv), after the last {tail} rows of the history, in its units."
    elif (best / "test_forecast.npy").is_file() and (best / "test_score.json").is_file():
        pred = np.load(best / "test_forecast.npy", allow_pickle=False)
        score = json.loads((best / "test_score.json").read_text())
        origin = f.test_origins()[-1]
        values = (frame[f.inputs].to_numpy(dtype=np.float64) - np.asarray(f.mean)) / np.asarray(f.std)
        rows = np.arange(max(0, origin - 2 * f.horizon), origin + f.horizon)
        times = frame[f.time].iloc[rows]
        for i, col in enumerate(shown, start=1):
            j = f.inputs.index(col)
            fig.add_trace(go.Scatter(x=times, y=values[rows, j], name="true", line={"color": "#555"}, showlegend=i == 1), row=i, col=1)
            fig.add_trace(go.Scatter(x=frame[f.time].iloc[origin: origin + f.horizon], y=pred[-1, :, f.targets.index(col)], name="forecast",
                                     line={"color": "#d62728"}, showlegend=i == 1), row=i, col=1)
        s = score.get("scores") or {}
        caption = (f"Test windows: {score.get('windows')}, forecast by node {score.get('node')} in forecast mode; test mse "
                   f"{s.get('mse', float('nan')):.4f}, mae {s.get('mae', float('nan')):.4f} (scaled values). Drawn: the last test "
                   f"window beside the true values.")
    else:
        return None
    fig.update_layout(autosize=True, height=220 * len(shown) + 60, margin=dict(l=50, r=20, t=40, b=30))
    return fig, caption


def render_report(run) -> str:
    """The report of a run as one HTML document (str), plotly.js inlined.

    Args:
        run: A :class:`~mcgs.snapshot.RunSnapshot` read with ``details=True``
            (``mcgs.load_run(RUN_DIR, details=True)``), or a :class:`~mcgs.search.Search`.

    Raises:
        ValueError: a snapshot read without ``details``.
    """
    import plotly.io as pio
    from jinja2 import Environment, PackageLoader, select_autoescape

    from mcgs.snapshot import detailed_snapshot

    snap = detailed_snapshot(run)
    nodes = list(snap.nodes)
    edges = list(snap.edges)
    graph_html = pio.to_html(_graph_figure(snap, nodes, edges), include_plotlyjs=True, full_html=False, div_id="graph",
                             config={"displaylogo": False, "responsive": True}, default_width="100%", default_height="560px")
    progress_html = pio.to_html(_progress_figure(snap), include_plotlyjs=False, full_html=False, div_id="progress",
                                config={"displaylogo": False, "responsive": True}, default_width="100%", default_height="320px")
    forecast = _forecast_figure(snap)
    forecast_html = forecast_caption = None
    if forecast is not None:
        forecast_html = pio.to_html(forecast[0], include_plotlyjs=False, full_html=False, div_id="forecast",
                                    config={"displaylogo": False, "responsive": True}, default_width="100%")
        forecast_caption = forecast[1]
    rec = snap.record
    best = snap.chosen_node
    env = Environment(loader=PackageLoader("mcgs", "templates"), autoescape=select_autoescape(["html", "j2"]))
    table = [n for n in nodes if n.parent_id is not None]
    return env.get_template("report.html.j2").render(
        run=rec, task=snap.task, settings=snap.settings, best=best, nodes=table, seq_of={n.id: n.seq for n in nodes if n.parent_id is not None},
        graph_html=graph_html, progress_html=progress_html, forecast_html=forecast_html, forecast_caption=forecast_caption, nodes_dir=str(Path(snap.run_dir).resolve() / "nodes"),
        details_json=json.dumps(_details(snap, nodes)).replace("</", "<\\/"),
        spend=sum(c.cost_usd for c in snap.llm_calls), esc=html.escape,
        counts={s: sum(1 for n in table if n.state.value == s) for s in sorted({n.state.value for n in table})},
    )


def write_report(run, path: str | Path) -> Path:
    """Write :func:`render_report` of ``run`` (a snapshot read with ``details=True``, or a
    search) to ``path`` atomically. Returns the path.

    Raises:
        IsADirectoryError: ``path`` is a folder.
        ValueError: ``path`` is inside the run's own files (storage, ``best/``, ``nodes/``,
            ``input/``) or is an existing file that is not an HTML file, which the report
            would replace.
    """
    import os

    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "it is a folder; give a file name such as report.html", str(path))
    run_dir = Path(run.run_dir).resolve()
    target = path.resolve()
    own = [run_dir / name for name in ("best", "nodes", "input")]
    if (target.parent == run_dir and target.name.startswith("mcgs.db")) or any(target.is_relative_to(d) for d in own):
        raise ValueError(f"{path} is one of the run's own files (in {run_dir}); write the report elsewhere, "
                         f"e.g. -o {run_dir / 'report.html'}")
    if path.exists() and path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"{path} exists and is not an HTML file; the report would replace it. "
                         f"Give a new file name ending in .html (-o/--output)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(render_report(run), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
