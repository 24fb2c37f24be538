"""A node's fidelity in its own column: the share of the training rows its program saw (1 = the
full data and fold scheme the final choice uses), so scores of different fidelities are never
compared as if equal (storage schema version 6; issue 33 §2).

Existing runs are filled with 1: every node before this revision ran on the full data.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("fidelity", sa.Float(), nullable=False, server_default="1.0"))
    op.execute("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'")


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("fidelity")
    op.execute("UPDATE schema_info SET value = '5' WHERE key = 'schema_version'")
