"""The cost ledger: one row per language-model call (storage schema version 3).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False, index=True),
        sa.Column("node_seq", sa.Integer, nullable=True),
        sa.Column("operator", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("cache_write_tokens", sa.Integer, nullable=False),
        sa.Column("cache_read_tokens", sa.Integer, nullable=False),
        sa.Column("latency_s", sa.Float, nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.execute("UPDATE schema_info SET value = '3' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_table("llm_calls")
    op.execute("UPDATE schema_info SET value = '2' WHERE key = 'schema_version'")
