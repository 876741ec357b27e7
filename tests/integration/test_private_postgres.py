"""The session's private PostgreSQL (tests/harness/postgres.py): made with initdb on a
free port, reachable without a password, stopped by its PID with its files removed."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.harness import postgres
from tests.support import databases


@pytest.fixture
def tmp_root() -> Iterator[Path]:
    """A temp dir the `postgres` user can traverse (pytest's tmp_path is root's 0700)."""
    root = Path(tempfile.mkdtemp(prefix="shoal-pg-harness-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.postgres
def test_a_private_server_starts_answers_and_stops(tmp_root: Path) -> None:
    try:
        server = postgres.start(tmp_root=tmp_root)
    except postgres.PostgresUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs a private PostgreSQL here: {exc}")
        pytest.skip(str(exc))
    try:
        assert server.port != 5432
        with psycopg.connect(server.admin_dsn, connect_timeout=5) as conn:
            row = conn.execute("SELECT current_setting('listen_addresses')").fetchone()
        assert row == ("127.0.0.1",)
        assert postgres._alive(server.pid)
    finally:
        postgres.stop(server)
    assert not postgres._alive(server.pid)
    assert not server.base_dir.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.admin_dsn, connect_timeout=2)


@pytest.mark.postgres
def test_a_leftover_of_a_dead_session_is_stopped_and_removed(tmp_root: Path) -> None:
    try:
        server = postgres.start(tmp_root=tmp_root)
    except postgres.PostgresUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs a private PostgreSQL here: {exc}")
        pytest.skip(str(exc))
    (server.base_dir / "owner.pid").write_text("999999999")  # a session that died
    postgres.reap_leftovers(tmp_root)
    assert not postgres._alive(server.pid)
    assert not server.base_dir.exists()


def test_the_session_server_is_the_one_the_tests_get() -> None:
    """Forced private: the URL the tests get is not the machine's 5432."""
    if os.environ.get(databases.FORCE_PRIVATE_ENV, "") in ("", "0"):
        pytest.skip(f"only meaningful with {databases.FORCE_PRIVATE_ENV}=1")
    if os.environ.get(databases.UNAVAILABLE_ENV):
        pytest.skip(os.environ[databases.UNAVAILABLE_ENV])
    assert databases.url_base() != databases.MACHINE_URL
    assert databases.pg_unreachable_reason() is None
