"""Throwaway databases for tests: a SQLite file under tmp_path, or a fresh
PostgreSQL database on the machine's server (dropped afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

PG_ADMIN_DSN = os.environ.get(
    "SHOAL_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
)
PG_URL_BASE = os.environ.get("SHOAL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432")


def pg_unreachable_reason() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_URL_BASE} is unreachable ({exc.__class__.__name__}: {exc})"


def require_postgres() -> None:
    """Skip when PostgreSQL is unreachable; under CI=true fail instead, loudly."""
    reason = pg_unreachable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs PostgreSQL: {reason}")
    pytest.skip(reason)


@contextmanager
def throwaway_pg() -> Iterator[str]:
    """Create `shoal_test_<hex>`, yield its URL, drop it (terminating sessions)."""
    require_postgres()
    name = f"shoal_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_URL_BASE}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
