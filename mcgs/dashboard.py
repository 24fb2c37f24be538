"""``mcgs dashboard RUN_DIR``: a local web page that watches a run, live, from its storage alone.

It reads the run as ``mcgs status`` and ``mcgs report`` do (:func:`mcgs.snapshot.load_run`: a
frozen snapshot, no engine, nothing written), so it works on a run being searched, a finished
one, an archived read-only copy and a PostgreSQL run shared by many workers. The page (one
document, plotly.js bundled from the installed ``plotly`` package: nothing is fetched from a
network) asks the server every ``POLL_S`` seconds whether the run changed, and redraws the
graph, the facts, the score over time and the node table without a reload; a click on a node
(in the graph or the table) fetches its panel: plan, program, the diff to its primary parent,
outcome, log tails, reviews, the knowledge entries and LLM calls behind it.

Routes: ``/`` (the page), ``/api/state?version=V`` (the run's facts, graph and table, or
``{"version": V}`` when nothing changed), ``/api/node/<seq>`` (one node's panel).

It binds to 127.0.0.1 by default. On any other host a token is required: every request carries
``?token=...`` once (the page then keeps it in a cookie); without it the answer is 403.
Built on Starlette (ASGI) and served by uvicorn.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["PAGE_ROWS", "POLL_S", "Dashboard", "create_app", "is_loopback"]

#: How often the page asks whether the run changed, seconds.
POLL_S = 2.0
#: A snapshot is read again at most this often, seconds (many tabs, one read).
SNAPSHOT_TTL_S = 1.0
#: Rows of the node table drawn at once (more on request). Measured in headless chromium on a
#: 5 000-node run (docs/results/dashboard.md): all rows cost the tab ~250 MiB and ~1 s of load.
PAGE_ROWS = 200


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, ``127.*``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Dashboard:
    """What the pages show, read from a run's storage (module docstring).

    Args:
        source: The run folder.
        run: The run's name when its storage holds several.
        storage: The storage URL when it is not the run folder's own (a PostgreSQL run shared by
            workers: ``postgresql+psycopg://...``).

    Raises:
        What :func:`mcgs.load_run` raises for a missing run.
    """

    def __init__(self, source: str | Path, run: str | None = None, storage: str | None = None):
        self.source, self.run, self.storage = source, run, storage
        self._lock = threading.Lock()
        self._snap = None
        self._read_at = 0.0
        self._state: dict[str, Any] | None = None
        self._state_json: bytes = b""
        self.snapshot()  # fail now, with the storage's message, rather than on the first page

    def snapshot(self):
        """The run's snapshot (node summaries: no programs or logs), read again when older than
        :data:`SNAPSHOT_TTL_S`."""
        import mcgs

        with self._lock:
            if self._snap is None or time.monotonic() - self._read_at > SNAPSHOT_TTL_S:
                self._snap = mcgs.load_run(self.source, storage=self.storage, name=self.run)
                self._read_at = time.monotonic()
            return self._snap

    @staticmethod
    def version(snap) -> str:
        """What changes when the page must be redrawn: the nodes' states and the run's status."""
        nodes = snap.nodes
        return f"{snap.record.status}:{len(nodes)}:{sum(n.state.is_finished() for n in nodes)}:{snap.record.best_node_id}"

    def state(self) -> dict[str, Any]:
        """The page's content: facts, the graph and score figures (plotly JSON), the table;
        built once per :meth:`version` of the run."""
        return self._current()[0]

    def state_json(self) -> bytes:
        """:meth:`state` as the JSON the page reads (UTF-8), serialised once per version."""
        return self._current()[1]

    def _current(self) -> tuple[dict[str, Any], bytes]:
        snap = self.snapshot()
        with self._lock:
            if self._state is None or self._state["version"] != self.version(snap):
                self._state = self._build(snap)
                self._state_json = json.dumps(self._state, separators=(",", ":")).encode()
            return self._state, self._state_json

    def _build(self, snap) -> dict[str, Any]:
        import plotly.io as pio

        from mcgs.report import _graph_figure

        nodes, rec, task, s = list(snap.nodes), snap.record, snap.task, snap.settings
        table = [n for n in nodes if n.parent_id is not None]
        seq_of = {n.id: n.seq for n in table}
        best = snap.chosen_node
        counts: dict[str, int] = {}
        for n in table:
            counts[n.state.value] = counts.get(n.state.value, 0) + 1
        spend = sum(c.cost_usd for c in snap.llm_calls)
        facts = {
            "run": rec.name, "task": task.name, "status": rec.status, "metric": task.metric, "higher_is_better": task.higher_is_better,
            "elapsed_s": rec.elapsed_s, "time_budget_s": s.time_budget_s, "max_nodes": s.max_nodes, "nodes": len(table), "counts": counts,
            "llm_usd": spend, "max_cost_usd": s.llm.max_cost_usd, "policy": s.policy, "coder": s.coder,
            "chosen": None if best is None else {"seq": best.seq, "operator": best.operator.value, "score": best.score},
        }
        members = []
        if best is not None and best.operator.value == "ensemble":
            by_id = {n.id: n for n in nodes}
            members = [{"seq": by_id[int(i)].seq, "weight": w, "score": by_id[int(i)].score, "model": by_id[int(i)].config.get("model")}
                       for i, w in (best.config.get("weights") or {}).items() if int(i) in by_id]
        rows = [{"seq": n.seq, "parent": seq_of.get(n.parent_id), "operator": n.operator.value, "state": n.state.value, "score": n.score,
                 "reward": n.reward, "runtime_s": n.runtime_s, "plan": (n.plan or "")[:140]} for n in table]
        return {"version": self.version(snap), "facts": facts, "members": members, "rows": rows,
                "graph": json.loads(pio.to_json(_graph_figure(snap, nodes, list(snap.edges)))),
                "scores": json.loads(pio.to_json(_score_figure(snap, table)))}

    def node(self, seq: int) -> dict[str, Any] | None:
        """One node's panel (the report's, with its knowledge entries and LLM calls), or None;
        the node and its parent are read in full (program, logs) from the storage."""
        from mcgs.knowledge_base import load_entries
        from mcgs.report import _details
        from mcgs.run_folder import locate_run

        snap = self.snapshot()
        brief = next((n for n in snap.nodes if n.seq == seq and n.parent_id is not None), None)
        if brief is None:
            return None
        store, _ = locate_run(self.source, storage=self.storage, name=self.run, read_only=True)
        try:
            target = store.get_node(brief.id)
            parent = store.get_node(brief.parent_id)
        finally:
            store.close()
        d = _details(snap, [parent, target])[str(seq)]  # two nodes: both in full
        titles = {e.id: e.title for e in load_entries()}
        d["knowledge"] = [{"id": k, "title": titles.get(k, "")} for k in target.knowledge_ids]
        d["llm_calls"] = [{"kind": c.kind, "model": c.model, "outcome": c.outcome, "cost_usd": c.cost_usd} for c in snap.llm_calls if c.node_seq == seq]
        return d


def _score_figure(snap, table):
    """Each valid node's score at the time it finished, one colour per operator, and the best so
    far (the chosen node's score over time)."""
    import plotly.graph_objects as go

    from mcgs.plots import best_so_far

    start = min((n.created_at for n in table if getattr(n, "created_at", None) is not None), default=None)
    fig = go.Figure()
    for op in sorted({n.operator.value for n in table}):
        group = [n for n in table if n.operator.value == op and n.is_valid and n.finished_at is not None]
        if group and start is not None:
            fig.add_trace(go.Scatter(x=[(n.finished_at - start).total_seconds() for n in group], y=[n.score for n in group], mode="markers",
                                     name=op, customdata=[n.seq for n in group], text=[f"node {n.seq}" for n in group]))
    points = best_so_far(snap.nodes, snap.task.higher_is_better)
    if points:
        fig.add_trace(go.Scatter(x=[t for t, _ in points], y=[v for _, v in points], mode="lines", line_shape="hv", name="best so far",
                                 line=dict(color="#222222")))
    fig.update_layout(autosize=True, height=320, margin=dict(l=50, r=20, t=20, b=40), xaxis_title="seconds since the first node",
                      yaxis_title=f"{snap.task.metric} ({'higher' if snap.task.higher_is_better else 'lower'} is better)")
    return fig


def create_app(source: str | Path, *, run: str | None = None, storage: str | None = None, token: str | None = None):
    """The dashboard's ASGI application (Starlette) for a run folder or storage URL.

    Args:
        source, run, storage: The run (:class:`Dashboard`).
        token: When given, every request needs it (``?token=`` once, then a cookie).

    Raises:
        What :func:`mcgs.load_run` raises for a missing run.
    """
    from jinja2 import Environment, PackageLoader, select_autoescape
    from plotly.offline import get_plotlyjs
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    board = Dashboard(source, run, storage)
    board.state()  # the first tab finds the graph built (seconds on a run of thousands of nodes)
    env = Environment(loader=PackageLoader("mcgs", "templates"), autoescape=select_autoescape(["html", "j2"]))
    page = env.get_template("dashboard.html.j2").render(plotly_js=get_plotlyjs(), poll_ms=int(POLL_S * 1000), page_rows=PAGE_ROWS)

    async def index(request):
        return HTMLResponse(page)

    async def state(request):
        snap = board.snapshot()
        if request.query_params.get("version") == board.version(snap):
            return JSONResponse({"version": board.version(snap)})
        return Response(board.state_json(), media_type="application/json")

    async def node(request):
        d = board.node(int(request.path_params["seq"]))
        return JSONResponse(d) if d is not None else JSONResponse({"error": "no such node"}, status_code=404)

    class TokenCheck(BaseHTTPMiddleware):
        async def dispatch(self, request, call_next):
            given = request.query_params.get("token") or request.cookies.get("mcgs_token") or ""
            if not hmac.compare_digest(given.encode(), token.encode()):
                return PlainTextResponse("forbidden: open the dashboard's URL with its ?token=...", status_code=403)
            response = await call_next(request)
            response.set_cookie("mcgs_token", token, httponly=True, samesite="strict")
            return response

    routes = [Route("/", index), Route("/api/state", state), Route("/api/node/{seq:int}", node)]
    return Starlette(routes=routes, middleware=[Middleware(TokenCheck)] if token else [])

