"""SQLAlchemy schema of the mcgs storage: runs, nodes, typed edges and schema version.

One concept per table; everything needed to rebuild a search graph is here (DESIGN §7:
storage is the single source of truth). Any change to these tables comes with an Alembic
migration (``mcgs/storage/migrations/versions``) and a bump of :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import datetime as _dt

from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 7  # changed only together with a new migration in mcgs/storage/migrations/versions

def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class SchemaInfo(Base):
    """Key/value facts about the database itself (``schema_version``)."""

    __tablename__ = "schema_info"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class RunModel(Base):
    """One search run: its task, settings, provenance and progress."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    created_at: Mapped[_dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[_dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    status: Mapped[str] = mapped_column(String(32), default="created")
    task_json: Mapped[str] = mapped_column(Text)
    settings_json: Mapped[str] = mapped_column(Text)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    data_fingerprint: Mapped[str] = mapped_column(String(64))
    package_versions_json: Mapped[str] = mapped_column(Text, default="{}")
    isolation: Mapped[str] = mapped_column(String(64), default="process-session")
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    best_node_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


class NodeModel(Base):
    """One node: program, operator, state, engine score, reward and output tails.

    ``owner`` is the worker holding the node's claim (``host:pid:start``), ``lease_expires_at``
    when that claim lapses unless the worker's heartbeat renews it, and ``attempts`` how many
    times the node was claimed (DESIGN §7: stale claims expire and are retried up to a limit).
    A PENDING node without an owner is queued: any worker of the run may claim it.
    """

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("run_id", "seq"), Index("ix_nodes_run_state", "run_id", "state"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"), nullable=True)
    operator: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(32))
    depth: Mapped[int] = mapped_column(Integer, default=0)
    plan: Mapped[str] = mapped_column(Text, default="")
    code: Mapped[str] = mapped_column(Text, default="")
    config_json: Mapped[str] = mapped_column(Text, default="{}")
    knowledge_ids_json: Mapped[str] = mapped_column(Text, default="[]")
    review_json: Mapped[str] = mapped_column(Text, default="{}")
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    stdout_tail: Mapped[str] = mapped_column(Text, default="")
    stderr_tail: Mapped[str] = mapped_column(Text, default="")
    runtime_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    workspace: Mapped[str | None] = mapped_column(String(512), nullable=True)
    owner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_expires_at: Mapped[_dt.datetime | None] = mapped_column(nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    role: Mapped[str] = mapped_column(String(32), default="candidate", server_default="candidate")
    fidelity: Mapped[float] = mapped_column(Float, default=1.0, server_default="1.0")
    peak_rss_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu: Mapped[int | None] = mapped_column(Integer, nullable=True)
    peak_gpu_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[_dt.datetime] = mapped_column(default=utcnow)
    started_at: Mapped[_dt.datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[_dt.datetime | None] = mapped_column(nullable=True)


class EdgeModel(Base):
    """A typed edge ``src -> dst`` (derives, fuses, references, ensembles)."""

    __tablename__ = "edges"
    __table_args__ = (UniqueConstraint("run_id", "src_id", "dst_id", "kind"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    src_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"))
    dst_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    operator: Mapped[str] = mapped_column(String(32))
    data_json: Mapped[str] = mapped_column(Text, default="{}")


class LLMCallModel(Base):
    """One call to a language model (the cost ledger): who asked, which model, the tokens
    billed, the latency, the provider's request id and the cost from the price table.

    ``kind`` is ``code`` (an operator's program), ``expert`` (an ask-the-expert planning call)
    or ``reask`` (a repeat after a malformed or repeated answer); ``outcome`` is ``ok``,
    ``malformed``, ``repeat`` (a program the graph already has), ``error`` or ``budget``
    (refused before sending: the spending limit).
    """

    __tablename__ = "llm_calls"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    node_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    operator: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16), default="code")
    model: Mapped[str] = mapped_column(String(128))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    outcome: Mapped[str] = mapped_column(String(16), default="ok")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[_dt.datetime] = mapped_column(default=utcnow)
