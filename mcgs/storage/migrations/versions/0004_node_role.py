"""A node's role in its own column: the final ensemble is stored as such, not recognised by a
prefix of its plan text (storage schema version 5).

Existing runs are filled: an ensemble node whose plan starts with ``[final ensemble]`` (the tag
every mcgs before this revision wrote on its final ensemble) gets the role ``final_ensemble``,
every other node ``candidate``.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("role", sa.String(32), nullable=False, server_default="candidate"))
    op.execute("UPDATE nodes SET role = 'final_ensemble' WHERE operator = 'ensemble' AND plan LIKE '[final ensemble]%'")
    op.execute("UPDATE schema_info SET value = '5' WHERE key = 'schema_version'")


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("role")
    op.execute("UPDATE schema_info SET value = '4' WHERE key = 'schema_version'")
