"""Integrations with experiment trackers, as search callbacks (``callback(search, node)`` after
each finished node: :func:`mcgs.create_search`'s ``callbacks``).

:class:`MLflowCallback` logs a search to MLflow (optional extra ``mcgs[mlflow]``: the
``mlflow-skinny`` client): one MLflow run for the search, and under it one nested run per
finished node, so the MLflow UI lists the nodes as the search made them.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

__all__ = ["MLflowCallback"]

logger = logging.getLogger(__name__)

#: MLflow's limit on a parameter value's length (characters)
PARAM_CHARS = 500


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A node's config as MLflow parameters: nested dicts flattened to ``a.b``, values as text."""
    out: dict[str, str] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v and all(isinstance(x, (str, int, float, bool, type(None))) for x in v.values()):
            out.update(_flat(v, key + "."))
        else:
            out[key] = (v if isinstance(v, str) else json.dumps(v, default=str))[:PARAM_CHARS]
    return out


class MLflowCallback:
    """Log a search to MLflow as it runs.

    The search is one MLflow run (tags ``mcgs.run_dir``, ``mcgs.task``, ``mcgs.metric``;
    parameters: policy, coder, budget, seed); each finished node is a run nested under it
    (``mlflow.parentRunId``) with

    * parameters: the node's config (``model``, ``params.*``, ``features.*``, ...; an LLM's
      program has its ``author``) and the start of its plan;
    * metrics: ``score`` (the engine's validation score, when valid), ``runtime_s``, ``reward``
      and ``cost_usd`` (its LLM calls);
    * tags: ``mcgs.node``, ``mcgs.operator``, ``mcgs.state``, ``mcgs.branch`` (the draft the node
      descends from), ``mcgs.fidelity``;
    * the program as the artifact ``solution.py``; the run ends ``FINISHED`` for a valid node,
      ``FAILED`` otherwise.

    The search's run carries ``best_score`` (a metric, one step per node) and the tag
    ``mcgs.chosen_node``: the node the run would hand in now, the final one after the last node.
    A resumed search finds its run again by ``mcgs.run_dir`` and logs only nodes not logged yet.
    A tracker that fails is said once in the log and the search goes on.

    Args:
        tracking_uri: Where to log: a tracking server (``http://host:5000``) or a local database
            (``sqlite:///mlflow.db``); default: MLflow's own (``MLFLOW_TRACKING_URI``).
        experiment: The MLflow experiment (created when missing).
        log_code: Log each node's program as an artifact.

    Raises:
        ImportError: (when first called) MLflow is not installed: ``pip install 'mcgs[mlflow]'``.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "mcgs", log_code: bool = True):
        self.tracking_uri, self.experiment, self.log_code = tracking_uri, experiment, log_code
        self._client = None
        self._experiment_id: str | None = None
        self._parent: str | None = None
        self._logged: set[int] = set()
        self._branch: dict[int, int] = {}
        self._broken = False

    def __call__(self, search, node) -> None:
        if self._broken or node.parent_id is None:
            return
        try:
            self._log(search, node)
        except ImportError:
            raise
        except Exception as exc:  # a tracker that fails must not stop the search
            self._broken = True
            logger.warning("MLflow logging stopped: %s", exc)
            search.say(f"warning: MLflow logging stopped ({type(exc).__name__}: {str(exc)[:200]}); the search goes on")

    # ------------------------------------------------------------------ internals

    def _setup(self, search) -> None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ImportError("MLflowCallback needs MLflow: pip install 'mcgs[mlflow]' (or mlflow-skinny)") from exc
        self._client = client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = client.get_experiment_by_name(self.experiment)
        self._experiment_id = exp.experiment_id if exp is not None else client.create_experiment(self.experiment)
        run_dir = str(Path(search.run_dir).resolve())
        found = client.search_runs([self._experiment_id], filter_string=f"tags.`mcgs.run_dir` = '{run_dir}'", max_results=1000)
        parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
        if parents:
            self._parent = parents[0].info.run_id
            children = client.search_runs([self._experiment_id], filter_string=f"tags.mlflow.parentRunId = '{self._parent}'", max_results=50_000)
            self._logged = {int(r.data.tags["mcgs.node"]) for r in children if "mcgs.node" in r.data.tags}
            return
        s, task = search.settings, search.task
        run = client.create_run(self._experiment_id, run_name=Path(run_dir).name,
                                tags={"mcgs.run_dir": run_dir, "mcgs.task": task.name, "mcgs.metric": task.metric,
                                      "mcgs.higher_is_better": str(task.higher_is_better)})
        self._parent = run.info.run_id
        for k, v in {"policy": s.policy, "coder": s.coder, "time_budget_s": s.time_budget_s, "max_nodes": s.max_nodes, "seed": s.seed}.items():
            client.log_param(self._parent, k, str(v))

    def _branch_of(self, search, node) -> int:
        """The sequence number of the root child (a draft, or an Aggregate) ``node`` descends from."""
        by_id = None
        cur, chain = node, []
        while cur.id not in self._branch:
            chain.append(cur)
            by_id = by_id or {n.id: n for n in search.nodes()}
            parent = by_id.get(cur.parent_id)
            if parent is None or parent.parent_id is None:
                self._branch[cur.id] = cur.seq
                break
            cur = parent
        for n in chain:
            self._branch[n.id] = self._branch[cur.id]
        return self._branch[node.id]

    def _log(self, search, node) -> None:
        if self._client is None:
            self._setup(search)
        if node.seq in self._logged:
            return
        client = self._client
        tags = {"mlflow.parentRunId": self._parent, "mcgs.node": str(node.seq), "mcgs.operator": node.operator.value,
                "mcgs.state": node.state.value, "mcgs.branch": str(self._branch_of(search, node)), "mcgs.fidelity": str(node.fidelity)}
        run = client.create_run(self._experiment_id, run_name=f"node {node.seq} ({node.operator.value})", tags=tags)
        rid = run.info.run_id
        from mlflow.entities import Metric, Param

        params = {**_flat(node.config or {}), "plan": (node.plan or "")[:PARAM_CHARS]}
        cost = sum(c.cost_usd for c in search.storage.llm_calls(search.run_id) if c.node_seq == node.seq)
        metrics = {"runtime_s": node.runtime_s, "reward": node.reward, "cost_usd": cost, "score": node.score if node.is_valid else None}
        now = int(time.time() * 1000)
        client.log_batch(rid, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items() if v is not None],
                         params=[Param(k, v) for k, v in list(params.items())[:100]])
        if self.log_code and node.code:
            client.log_text(rid, node.code, "solution.py")
        client.set_terminated(rid, status="FINISHED" if node.is_valid else "FAILED")
        self._logged.add(node.seq)
        final = search.final_node
        if final is not None and final.score is not None:
            client.log_metric(self._parent, "best_score", float(final.score), step=node.seq)
            client.set_tag(self._parent, "mcgs.chosen_node", str(final.seq))
