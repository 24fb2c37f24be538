"""What a node's program used, in its own columns: its peak resident memory, the GPU it was
handed and the GPU memory it held at most (storage schema version 7; issue 34 §4).

Existing runs keep them empty: nothing was measured for their nodes.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("peak_rss_mb", sa.Float(), nullable=True))
    op.add_column("nodes", sa.Column("gpu", sa.Integer(), nullable=True))
    op.add_column("nodes", sa.Column("peak_gpu_mb", sa.Float(), nullable=True))
    op.execute("UPDATE schema_info SET value = '7' WHERE key = 'schema_version'")


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("peak_gpu_mb")
        batch.drop_column("gpu")
        batch.drop_column("peak_rss_mb")
    op.execute("UPDATE schema_info SET value = '6' WHERE key = 'schema_version'")
