"""Alembic environment: runs on the connection the storage passes in ``config.attributes``."""

from alembic import context

from mcgs.storage.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
