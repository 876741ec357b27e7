"""A pooled PostgreSQL connection is pinged before use only after it sat idle: one the
server dropped while idle is replaced unseen; one dropped right after use fails its
next transaction as the database being unreachable, and the pool recovers at once."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import text

from shoal.db import errors
from shoal.db.engine import Database
from tests.support.databases import admin_dsn

pytestmark = pytest.mark.postgres


def _backend(db: Database) -> int:
    with db.core_read() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _terminate(pid: int) -> None:
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_dropped_while_idle_is_replaced_before_use(pg_url: str) -> None:
    db = Database(pg_url, pool_max=1, ping_idle_s=0.0)  # every checkout counts as idle
    try:
        first = _backend(db)
        _terminate(first)
        second = _backend(db)  # no error: the ping found it dead and the pool reconnected
        assert second != first
    finally:
        db.close()


def test_a_connection_dropped_right_after_use_fails_once_then_the_pool_recovers(
    pg_url: str,
) -> None:
    db = Database(pg_url, pool_max=1, ping_idle_s=3600.0)  # never idle long enough
    try:
        first = _backend(db)
        _terminate(first)
        with pytest.raises(errors.DatabaseError) as caught:
            _backend(db)
        assert errors.unavailable(caught.value) is not None  # a 503 / a retried pass
        assert _backend(db) != first
    finally:
        db.close()
