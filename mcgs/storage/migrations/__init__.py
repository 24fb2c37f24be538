"""Alembic migrations of the mcgs storage (``env.py`` and ``versions/``), applied by
:class:`mcgs.storage.Storage` when it opens a database; see :func:`mcgs.storage.upgrade`."""
