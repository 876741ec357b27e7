"""Throwaway databases for tests: a SQLite file under tmp_path, or a fresh
PostgreSQL database on the session's server (dropped afterwards).

The server: `SHOAL_TEST_PG_DSN`/`SHOAL_TEST_PG_URL` when set, else the machine's at
127.0.0.1:5432 when it lets `postgres` in without a password, else a private server the
session starts itself (tests/harness/postgres.py, decided once in `provision`).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tests.harness import postgres

DSN_ENV = "SHOAL_TEST_PG_DSN"
URL_ENV = "SHOAL_TEST_PG_URL"
FORCE_PRIVATE_ENV = "SHOAL_TEST_PRIVATE_POSTGRES"
# Why the session has no PostgreSQL, set by `provision` for the tests' skip/fail message.
UNAVAILABLE_ENV = "SHOAL_TEST_PG_UNAVAILABLE"
MACHINE_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
MACHINE_URL = "postgresql://postgres@127.0.0.1:5432"


def admin_dsn() -> str:
    return os.environ.get(DSN_ENV, MACHINE_DSN)


def url_base() -> str:
    return os.environ.get(URL_ENV, MACHINE_URL)


def _connect_error(dsn: str) -> str | None:
    try:
        with psycopg.connect(dsn, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"{exc.__class__.__name__}: {exc}"


def provision() -> postgres.PrivatePostgres | None:
    """Choose the session's server, once, in the pytest controller; export its address.

    Returns the private server when one was started (the caller stops it at the end).
    """
    if os.environ.get(DSN_ENV):
        return None
    forced = os.environ.get(FORCE_PRIVATE_ENV, "") not in ("", "0")
    if not forced and _connect_error(MACHINE_DSN) is None:
        return None
    try:
        server = postgres.start()
    except (postgres.PostgresUnavailable, OSError, subprocess.SubprocessError) as exc:
        os.environ[UNAVAILABLE_ENV] = f"no private PostgreSQL: {exc}"
        return None
    os.environ[DSN_ENV] = server.admin_dsn
    os.environ[URL_ENV] = server.url_base
    return server


def pg_unreachable_reason() -> str | None:
    error = _connect_error(admin_dsn())
    if error is None:
        return None
    why = os.environ.get(UNAVAILABLE_ENV)
    return f"PostgreSQL at {url_base()} is unreachable ({error})" + (f"; {why}" if why else "")


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
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{url_base()}/{name}"
    finally:
        with psycopg.connect(admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
