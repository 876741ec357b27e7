"""Migrations and models must not drift; migrations apply twice without harm."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from shoal.db import migrations
from shoal.db.engine import Database
from shoal.db.tables import Base


def test_models_match_migrations(db_url: str) -> None:
    db = Database(db_url)
    try:
        migrations.upgrade(db)
        migrations.upgrade(db)  # idempotent: a restart re-applies nothing
        with db.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, Base.metadata)
        assert diff == [], f"models and migrations drift: {diff}"
        tables = set(sa.inspect(db.engine).get_table_names())
        assert {"clusters", "nodegroups", "nodes", "events", "leases"} <= tables
    finally:
        db.close()
