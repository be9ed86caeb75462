"""Alembic's environment for the store: migrations run on the connection typedrag.store.database hands over
(inside its locked transaction), never on one opened from an alembic.ini.

A new migration: `alembic -x url=sqlite:///tmp/x.db revision --autogenerate -m "what changes"` is not wired
up; write it by hand in versions/ (next number, `down_revision` the previous one), with batch_alter_table for
SQLite, and add its case to tests/test_store_migrations.py (a database at the previous revision, with rows).
"""

from alembic import context

from typedrag.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True, compare_type=True)
with context.begin_transaction():
    context.run_migrations()
