"""The first schema (storage schema version 2): runs, nodes, typed edges, schema_info.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schema_info",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(256), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("task_json", sa.Text, nullable=False),
        sa.Column("settings_json", sa.Text, nullable=False),
        sa.Column("seed", sa.Integer, nullable=False),
        sa.Column("data_fingerprint", sa.String(64), nullable=False),
        sa.Column("package_versions_json", sa.Text, nullable=False),
        sa.Column("isolation", sa.String(64), nullable=False),
        sa.Column("elapsed_s", sa.Float, nullable=False),
        sa.Column("best_node_id", sa.Integer, nullable=True),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=True),
        sa.Column("operator", sa.String(32), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("plan", sa.Text, nullable=False),
        sa.Column("code", sa.Text, nullable=False),
        sa.Column("config_json", sa.Text, nullable=False),
        sa.Column("knowledge_ids_json", sa.Text, nullable=False),
        sa.Column("review_json", sa.Text, nullable=False),
        sa.Column("score", sa.Float, nullable=True),
        sa.Column("reward", sa.Float, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("stdout_tail", sa.Text, nullable=False),
        sa.Column("stderr_tail", sa.Text, nullable=False),
        sa.Column("runtime_s", sa.Float, nullable=True),
        sa.Column("workspace", sa.String(512), nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=True),
        sa.Column("finished_at", sa.DateTime, nullable=True),
        sa.UniqueConstraint("run_id", "seq"),
    )
    op.create_index("ix_nodes_run_state", "nodes", ["run_id", "state"])
    op.create_table(
        "edges",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
        sa.Column("src_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False),
        sa.Column("dst_id", sa.Integer, sa.ForeignKey("nodes.id"), nullable=False, index=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("operator", sa.String(32), nullable=False),
        sa.Column("data_json", sa.Text, nullable=False),
        sa.UniqueConstraint("run_id", "src_id", "dst_id", "kind"),
    )
    op.bulk_insert(sa.table("schema_info", sa.column("key"), sa.column("value")), [{"key": "schema_version", "value": "2"}])


def downgrade() -> None:
    for t in ("edges", "nodes", "runs", "schema_info"):
        op.drop_table(t)
