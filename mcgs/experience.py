"""Learning across runs: the experience store, what a finished run adds to it, and what a new run
takes from it.

A finished run contributes (:func:`contribute`) its task's **meta-features** (row and column
counts, column-kind shares, missing share, class count: :func:`meta_features`; never a row, a
label, a column name or a class name), and for each node that ran: its model family, its recipe
configuration (parameters and feature blocks), its full-fidelity score as a rank within the run
(1 = the run's best, 0 = its worst), its run time and how its cost compared with the cost model's
prior, how it failed when it did, and whether it lies on the path that led to one of the run's
best nodes or to the node the run handed in (an ensemble's members count: which families,
operators and knowledge entries got there).

A new run recalls (:func:`recall`) the runs whose meta-features lie nearest its own (same task
kind and modality; the data fingerprint of its own task excluded unless asked: an evaluation never
learns from itself) and turns them into an :class:`Experience`: the model families in the order
of their value there (their rank among the run's families, and whether they were part of what
the run handed in: an ensemble needs members that err differently, so a weaker family that won a
place in the ensembles ranks above a stronger one that never did), the configuration each family
won with (a portfolio, as FLAML's zero-shot AutoML picks a configuration per data set from the
nearest meta-features: Kayali & Wang, *Mining Robust Default Configurations for
Resource-constrained AutoML*, 2022), each family's relative cost, and the failures seen. The
recipe coder drafts in that order from those configurations, the cost model starts from those
costs, the LLM coder's prompt carries a short "what worked on similar data" section, draft-plan
screening is skipped when the experience already orders the plans, and when most of those runs
handed in an ensemble the first ensemble is built as soon as the drafts are done
(:func:`mcgs.operators.ensemble.ensemble_due`).
The run keeps what it used in ``RUN_DIR/experience.json``; ``mcgs status`` says so.

The store is a SQLite file (setting ``experience_store``; default ``~/.local/share/mcgs/experience.db``,
or ``$XDG_DATA_HOME/mcgs``) or any SQLAlchemy URL (PostgreSQL). ``none`` turns it off. A store that
cannot be read or written (corrupt, locked, on a full disk) leaves the run working: the run says
so and goes on without it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text, create_engine, delete, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

__all__ = ["ExperienceStore", "ExperienceError", "Experience", "meta_features", "contribute", "recall", "default_store_path",
           "store_url", "without_experience", "prepare_experience", "EXPERIENCE_FILE", "NEAREST_RUNS", "OFF", "UNTRIED_VALUE"]

logger = logging.getLogger(__name__)

#: The runs an experience is drawn from (the nearest by meta-features). Ours.
NEAREST_RUNS = 5
#: The value of a model family no recalled run tried (values run from 0 to 1): drafted after every
#: family that similar runs tried, in the knowledge base's order. Those runs drafted in that order
#: too, so a family they never reached is one the priors put last; drafted earlier, kNN took the
#: place of logistic regression on hmda_deny in the leave-one-task-out smoke (its held-out AUC
#: 0.845 -> 0.826: docs/results/experience_loto_smoke.md). Ours.
UNTRIED_VALUE = 0.0
#: Seconds a run waits for a store another process holds locked before it goes on without it.
LOCK_TIMEOUT_S = 5.0
#: The values of the ``experience_store`` setting that turn the store off.
OFF = ("none", "off", "")
#: Meta-features and their scale in the distance (FLAML's zero-shot AutoML uses instance, feature
#: and class counts and the share of numeric features, normalised; the kinds of column here are
#: this engine's profile's).
FEATURE_SCALES = {"log_rows": 1.0, "log_features": 1.0, "numeric_share": 1.0, "categorical_share": 1.0, "string_share": 1.0,
                  "missing_share": 1.0, "log_classes": 0.5}


class ExperienceError(RuntimeError):
    """The experience store cannot be opened, read or written; the message names it and why."""


class _Base(DeclarativeBase):
    pass


class _RunRow(_Base):
    __tablename__ = "experience_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(200))  # the run's name (its folder's name), for `mcgs experience list`
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    task_kind: Mapped[str] = mapped_column(String(32))
    modality: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(64))
    features_json: Mapped[str] = mapped_column(Text)
    n_nodes: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[str] = mapped_column(String(40))


class _NodeRow(_Base):
    __tablename__ = "experience_nodes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("experience_runs.id", ondelete="CASCADE"), index=True)
    model: Mapped[str | None] = mapped_column(String(100), nullable=True)
    operator: Mapped[str] = mapped_column(String(32))
    config_json: Mapped[str] = mapped_column(Text)
    knowledge_json: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(32))
    rank: Mapped[float | None] = mapped_column(Float, nullable=True)
    runtime_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    cost_offset: Mapped[float | None] = mapped_column(Float, nullable=True)
    leads_to_best: Mapped[bool] = mapped_column(Boolean, default=False)


def default_store_path() -> Path:
    """``$XDG_DATA_HOME/mcgs/experience.db``, else ``~/.local/share/mcgs/experience.db``."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "mcgs" / "experience.db"


def store_url(setting: str | None) -> str | None:
    """The SQLAlchemy URL of the ``experience_store`` setting: None when off; a path becomes a
    SQLite URL; ``default`` (or unset) the per-user file (:func:`default_store_path`)."""
    if setting is None or str(setting).strip().lower() == "default":
        return f"sqlite:///{default_store_path()}"
    text = str(setting).strip()
    if text.lower() in OFF:
        return None
    return text if "://" in text else f"sqlite:///{Path(text).expanduser().resolve()}"


class ExperienceStore:
    """The store of what finished runs learned (see the module docstring).

    Args:
        url: A SQLAlchemy URL (:func:`store_url`).

    Raises:
        ExperienceError: it cannot be opened (a corrupt file, a folder that cannot be made).
    """

    def __init__(self, url: str):
        from sqlalchemy import event
        from sqlalchemy.exc import SQLAlchemyError

        self.url = url
        try:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            self.engine = create_engine(url, connect_args={"timeout": LOCK_TIMEOUT_S} if url.startswith("sqlite") else {})
            if url.startswith("sqlite"):
                event.listen(self.engine, "connect", lambda con, _: con.execute("PRAGMA foreign_keys=ON"))
            _Base.metadata.create_all(self.engine)
        except (SQLAlchemyError, OSError) as exc:
            raise ExperienceError(f"the experience store {self.shown} cannot be opened: {_why(exc)}") from None

    @property
    def shown(self) -> str:
        """The store as a user would name it (its file, or its URL without a password)."""
        return self.url.removeprefix("sqlite:///") if self.url.startswith("sqlite:///") else self.url.split("@")[-1]

    def _session(self) -> Session:
        return Session(self.engine)

    def add_run(self, row: dict[str, Any], nodes: list[dict[str, Any]]) -> int:
        """Store one run's contribution; a run already stored (same ``source`` and
        fingerprint) is replaced. Returns its id."""
        with self._guard("written"), self._session() as s, s.begin():
            s.execute(delete(_RunRow).where(_RunRow.source == row["source"], _RunRow.fingerprint == row["fingerprint"]))
            run = _RunRow(**row)
            s.add(run)
            s.flush()
            s.add_all(_NodeRow(run_id=run.id, **n) for n in nodes)
            return run.id

    def runs(self) -> list[dict[str, Any]]:
        """Every stored run: ``id``, ``source``, ``fingerprint``, ``task_kind``, ``modality``,
        ``metric``, ``features`` (meta-features), ``n_nodes``, ``created_at``."""
        with self._guard("read"), self._session() as s:
            return [_run_dict(r) for r in s.scalars(select(_RunRow).order_by(_RunRow.id))]

    def nodes(self, run_ids: Iterable[int]) -> list[dict[str, Any]]:
        """The stored nodes of ``run_ids``, as dicts (``config`` and ``knowledge_ids`` decoded)."""
        ids = list(run_ids)
        with self._guard("read"), self._session() as s:
            rows = s.scalars(select(_NodeRow).where(_NodeRow.run_id.in_(ids)).order_by(_NodeRow.id)) if ids else []
            return [{"run_id": r.run_id, "model": r.model, "operator": r.operator, "config": json.loads(r.config_json),
                     "knowledge_ids": json.loads(r.knowledge_json), "state": r.state, "rank": r.rank, "runtime_s": r.runtime_s,
                     "cost_offset": r.cost_offset, "leads_to_best": r.leads_to_best} for r in rows]

    def clear(self, fingerprint: str | None = None) -> int:
        """Remove every run (or those of one data fingerprint). Returns how many."""
        with self._guard("written"), self._session() as s, s.begin():
            q = select(_RunRow.id) if fingerprint is None else select(_RunRow.id).where(_RunRow.fingerprint == fingerprint)
            ids = list(s.scalars(q))
            if ids:
                s.execute(delete(_NodeRow).where(_NodeRow.run_id.in_(ids)))
                s.execute(delete(_RunRow).where(_RunRow.id.in_(ids)))
            return len(ids)

    def _guard(self, what: str):
        return _Guard(self, what)


class _Guard:
    """Turns a database error into :class:`ExperienceError` naming the store."""

    def __init__(self, store: ExperienceStore, what: str):
        self.store, self.what = store, what

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        from sqlalchemy.exc import SQLAlchemyError

        if exc is not None and isinstance(exc, (SQLAlchemyError, OSError, ValueError)):
            raise ExperienceError(f"the experience store {self.store.shown} cannot be {self.what}: {_why(exc)}") from None
        return False


def _why(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _run_dict(r: _RunRow) -> dict[str, Any]:
    return {"id": r.id, "source": r.source, "fingerprint": r.fingerprint, "task_kind": r.task_kind, "modality": r.modality, "metric": r.metric,
            "features": json.loads(r.features_json), "n_nodes": r.n_nodes, "created_at": r.created_at}


def meta_features(profile: dict[str, Any]) -> dict[str, float]:
    """The numbers of a data profile the store keeps and compares (no row, label or name):
    ``log_rows`` (log10 training rows), ``log_features`` (log10 of features + 1), the shares of
    numeric, categorical and string/text features, ``missing_share`` and ``log_classes``
    (log2 of the class count; 0 for regression), each rounded to 3 decimals."""
    n_feat = max(1, int(profile.get("n_features") or 0))
    out = {
        "log_rows": math.log10(max(1, int(profile.get("n_train") or 1))),
        "log_features": math.log10(n_feat + 1),
        "numeric_share": (profile.get("n_numeric") or 0) / n_feat,
        "categorical_share": (profile.get("n_categorical") or 0) / n_feat,
        "string_share": (profile.get("n_string") or 0) / n_feat,
        "missing_share": float(profile.get("missing_share") or 0.0),
        "log_classes": math.log2(max(1, int(profile.get("n_classes") or profile.get("n_labels") or 1))),
    }
    return {k: round(float(v), 3) for k, v in out.items()}


def distance(a: dict[str, float], b: dict[str, float]) -> float:
    """Euclidean distance of two :func:`meta_features`, each scaled by :data:`FEATURE_SCALES`."""
    return math.sqrt(sum(((a.get(k, 0.0) - b.get(k, 0.0)) * w) ** 2 for k, w in FEATURE_SCALES.items()))


@dataclasses.dataclass
class Experience:
    """What the nearest earlier runs say about a new task (:func:`recall`).

    Attributes:
        runs: The runs used: ``{"source", "distance", "fingerprint"}``, nearest first.
        family_ranks: Model family (knowledge id) -> its value in those runs, weighted by
            nearness, best first: in each run, the mean of its rank among the run's families by
            their best full-fidelity node (1 = the best family, 0 = the worst) and whether it
            was part of what the run handed in or of the paths to its best nodes (1 or 0).
        configs: Model family -> the recipe configuration it scored best with in the nearest
            run that tried it (``params`` and ``features``).
        cost_offsets: Model family -> how its log run time sat above the run's mean relative to
            the cost model's prior (:class:`mcgs.cost_model.CostModel` starts from these).
        failures: Model family -> ``{state: count}`` of its failed nodes in those runs.
        leads: The operators on the paths to those runs' best nodes, with counts.
        ensembles_won: How many of those runs handed in an ensemble.
    """

    runs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    family_ranks: dict[str, float] = dataclasses.field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    cost_offsets: dict[str, float] = dataclasses.field(default_factory=dict)
    failures: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    leads: dict[str, int] = dataclasses.field(default_factory=dict)
    ensembles_won: int = 0

    @property
    def empty(self) -> bool:
        """True when no earlier run was used."""
        return not self.runs

    def summary(self, limit: int = 6) -> str:
        """A few lines for an LLM prompt: what worked on similar data, and what failed."""
        if self.empty:
            return ""
        lines = [f"From {len(self.runs)} earlier run(s) on similar data (by size and column kinds; never this task's rows):"]
        for fam, rank in list(self.family_ranks.items())[:limit]:
            cfg = self.configs.get(fam, {})
            params = ", ".join(f"{k}={v}" for k, v in list(cfg.get("params", {}).items())[:6])
            lines.append(f"- {fam}: value {rank:.2f} (1 = the best family there, and part of what the run handed in)"
                         + (f"; won with {params}" if params else ""))
        if self.ensembles_won:
            lines.append(f"{self.ensembles_won} of those runs handed in an ensemble of several families' nodes.")
        bad = [f"{fam} ({', '.join(f'{k} x{v}' for k, v in kinds.items())})" for fam, kinds in self.failures.items()][:limit]
        if bad:
            lines.append("Failed there: " + "; ".join(bad))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The experience as JSON-able data (``RUN_DIR/experience.json``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Experience":
        """The experience :meth:`to_json` wrote; fields it lacks are empty."""
        return cls(**{f.name: data.get(f.name, f.default if f.default is not dataclasses.MISSING else f.default_factory())  # type: ignore[misc]
                      for f in dataclasses.fields(cls)})


def recall(store: ExperienceStore, profile: dict[str, Any], fingerprint: str, *, k: int = NEAREST_RUNS,
           same_task: bool = False) -> Experience:
    """The :class:`Experience` of the ``k`` stored runs nearest ``profile``: same task kind and
    modality, ranked by :func:`distance` of their :func:`meta_features`; runs of the same data
    ``fingerprint`` are left out unless ``same_task``.

    Raises:
        ExperienceError: the store cannot be read.
    """
    mine = meta_features(profile)
    kind, modality = profile.get("task_kind"), profile.get("modality", "table")
    near = sorted(((distance(mine, r["features"]), r) for r in store.runs()
                   if r["task_kind"] == kind and r["modality"] == modality and (same_task or r["fingerprint"] != fingerprint)),
                  key=lambda t: t[0])[:k]
    if not near:
        return Experience()
    weight = {r["id"]: 1.0 / (0.1 + d) for d, r in near}
    order = {r["id"]: i for i, (_, r) in enumerate(near)}
    nodes = store.nodes(weight)
    exp = Experience(runs=[{"source": r["source"], "distance": round(d, 3), "fingerprint": r["fingerprint"][:12]} for d, r in near])
    best_of: dict[tuple[str, int], dict] = {}
    placed: set[tuple[str, int]] = set()
    for n in nodes:
        fam = n["model"]
        if n["leads_to_best"]:
            exp.leads[n["operator"]] = exp.leads.get(n["operator"], 0) + 1
            exp.ensembles_won += n["operator"] == "ensemble"
            if fam:
                placed.add((fam, n["run_id"]))
        if not fam:
            continue
        if n["rank"] is not None and ((fam, n["run_id"]) not in best_of or n["rank"] > best_of[(fam, n["run_id"])]["rank"]):
            best_of[(fam, n["run_id"])] = n
        if n["state"] not in ("valid", "interrupted"):
            exp.failures.setdefault(fam, {}).setdefault(n["state"], 0)
            exp.failures[fam][n["state"]] += 1
    ranks: dict[str, list[tuple[float, float]]] = {}
    for run_id in weight:  # one value per family and run: its place among the run's families
        fams = sorted((f for f, rid in best_of if rid == run_id), key=lambda f: -best_of[(f, run_id)]["rank"])
        for i, fam in enumerate(fams):
            among = 1.0 if len(fams) == 1 else 1 - i / (len(fams) - 1)
            ranks.setdefault(fam, []).append((weight[run_id], (among + ((fam, run_id) in placed)) / 2))
    exp.family_ranks = dict(sorted(((f, round(sum(w * r for w, r in v) / sum(w for w, _ in v), 3)) for f, v in ranks.items()),
                                   key=lambda t: -t[1]))
    for fam in exp.family_ranks:  # the configuration of the nearest run that tried the family
        run_id = min((rid for f, rid in best_of if f == fam), key=lambda rid: order[rid])
        cfg = best_of[(fam, run_id)]["config"]
        exp.configs[fam] = {"params": cfg.get("params", {}), "features": cfg.get("features", {})}
    offsets: dict[str, list[float]] = {}
    for n in nodes:
        if n["model"] and n["cost_offset"] is not None:
            offsets.setdefault(n["model"], []).append(n["cost_offset"])
    exp.cost_offsets = {f: round(sum(v) / len(v), 3) for f, v in offsets.items()}
    return exp


def contribution(search) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What a finished run adds to the store: its run row and one row per node that ran (see the
    module docstring). Scores become ranks among the run's full-fidelity valid single nodes."""
    from mcgs.cost_model import CostModel
    from mcgs.direction import best_first
    from mcgs.node import NodeState, Operator

    nodes = [n for n in search.nodes() if n.parent_id is not None and n.state.is_finished()]
    singles = [n for n in nodes if n.is_valid and n.full_fidelity and n.operator is not Operator.ENSEMBLE]
    ordered = sorted(singles, key=lambda n: (best_first(n.score, search.task.higher_is_better), n.seq))
    rank = {n.id: (1.0 if len(ordered) == 1 else round(1 - i / (len(ordered) - 1), 3)) for i, n in enumerate(ordered)}
    prior = CostModel.for_task(search.profile, search.task.validation)
    logs: dict[int, float] = {}
    for n in nodes:
        try:
            if n.config.get("model") and n.runtime_s and n.state in (NodeState.VALID, NodeState.BUGGY):
                logs[n.id] = math.log(n.runtime_s / prior.prior_s(n.config, n.fidelity))
        except (KeyError, ValueError, ZeroDivisionError):
            continue
    mean = sum(logs.values()) / len(logs) if logs else 0.0
    by_id = {n.id: n for n in nodes}
    handed_in = search.final_node
    heads = list(ordered[:3])  # the paths to the run's three best nodes, and to what it handed in
    if handed_in is not None and handed_in.id in by_id:
        heads.append(handed_in)
        if handed_in.operator is Operator.ENSEMBLE:
            heads += [by_id[int(i)] for i in (handed_in.config.get("weights") or {}) if int(i) in by_id]
    on_path: set[int] = set()
    for best in heads:
        cur = best
        while cur is not None and cur.id not in on_path:
            on_path.add(cur.id)
            cur = by_id.get(cur.parent_id)
    rows = [{"model": n.config.get("model") or next((k for k in n.knowledge_ids if k.startswith("model.")), None), "operator": n.operator.value,
             "config_json": json.dumps(_safe_config(n.config)), "knowledge_json": json.dumps(list(n.knowledge_ids)), "state": n.state.value,
             "rank": rank.get(n.id), "runtime_s": n.runtime_s, "cost_offset": round(logs[n.id] - mean, 3) if n.id in logs else None,
             "leads_to_best": n.id in on_path} for n in nodes]
    run = {"source": str(Path(search.run_dir).resolve()), "fingerprint": search.run_record.data_fingerprint, "task_kind": search.profile.get("task_kind", ""),
           "modality": search.profile.get("modality", "table"), "metric": search.task.metric,
           "features_json": json.dumps(meta_features(search.profile)), "n_nodes": len(rows),
           "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    return run, rows


def _safe_config(config: dict[str, Any]) -> dict[str, Any]:
    """A node's recipe configuration reduced to what carries to other data: the model, its
    numeric, boolean or short-word parameters, and the on/off feature blocks (no column names,
    no values of the data)."""
    def scalar(v):
        return isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) <= 24 and v.replace("_", "").isalnum())

    params = {k: v for k, v in (config.get("params") or {}).items() if scalar(v)}
    features = {k: v for k, v in (config.get("features") or {}).items() if isinstance(v, bool)}
    return {"model": config.get("model"), "params": params, "features": features}


def contribute(search) -> bool:
    """Add a finished run to its experience store (setting ``experience_store``), unless the
    store is off. A store that fails is reported through ``search.say`` and the run is left as
    it is. Returns True when stored."""
    url = store_url(search.settings.experience_store)
    if url is None:
        return False
    try:
        store = ExperienceStore(url)
        run, rows = contribution(search)
        store.add_run(run, rows)
    except ExperienceError as exc:
        search.say(f"experience: not stored ({exc}); the run is complete without it")
        return False
    total = sum(n.parent_id is not None for n in search.nodes())
    unjudged = f" (the {total - len(rows)} left out were stopped before a verdict)" if total > len(rows) else ""
    search.say(f"experience: {len(rows)} of this run's {total} node(s) were added to {store.shown}{unjudged}")
    return True


def without_experience() -> None:
    """Turn the experience store off for this process and the runs it starts, unless
    ``MCGS_EXPERIENCE_STORE`` names one: benches, campaigns and experiments stay reproducible."""
    os.environ.setdefault("MCGS_EXPERIENCE_STORE", "none")


#: The file of a run folder that keeps the experience the run started from.
EXPERIENCE_FILE = "experience.json"


def prepare_experience(search) -> Experience:
    """The experience a run starts from, recalled once when a new run's first sitting begins and
    kept in ``RUN_DIR/experience.json`` (with the store it came from), read back on resume; an
    empty one when the store is off, fails (said, and the run goes on), or the run began
    before it had one. Sets ``search.experience``."""
    path = Path(search.run_dir) / EXPERIENCE_FILE
    if path.is_file():
        try:
            search.experience = Experience.from_json(json.loads(path.read_text())["experience"])
        except (ValueError, KeyError, TypeError) as exc:
            search.say(f"experience: {path} cannot be read ({exc}); the run goes on without it")
            search.experience = Experience()
        return search.experience
    search.experience = Experience()
    url = store_url(search.settings.experience_store)
    if url is None or any(n.parent_id is not None for n in search.nodes()):
        return search.experience
    try:
        store = ExperienceStore(url)
        search.experience = recall(store, search.profile, search.run_record.data_fingerprint, same_task=search.settings.experience_same_task)
    except ExperienceError as exc:
        search.say(f"experience: {exc}; the run goes on without it")
        return search.experience
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"store": store.shown, "experience": search.experience.to_json()}, indent=2))
    os.replace(tmp, path)
    if not search.experience.empty:
        top = ", ".join(list(search.experience.family_ranks)[:3])
        search.say(f"experience: {len(search.experience.runs)} earlier run(s) on similar data (from {store.shown}) order the drafts: {top} first")
    return search.experience
