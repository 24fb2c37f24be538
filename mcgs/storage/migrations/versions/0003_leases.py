"""Claims and leases on nodes, for workers sharing a run (storage schema version 4).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("owner", sa.String(128), nullable=True))
    op.add_column("nodes", sa.Column("lease_expires_at", sa.DateTime, nullable=True))
    op.add_column("nodes", sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
    op.execute("UPDATE schema_info SET value = '4' WHERE key = 'schema_version'")


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("attempts")
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
    op.execute("UPDATE schema_info SET value = '3' WHERE key = 'schema_version'")
