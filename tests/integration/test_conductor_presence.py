"""Whether a conductor is up is one query on what it recorded when it last reported:
its heartbeat period, and until when that makes it up (three of its own periods).
Real database (SQLite), the registry and the mservices service as the API calls it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shoal.db import migrations, registry
from shoal.db.engine import Database
from shoal.services import fleet
from shoal.services.context import Caller

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ADMIN = Caller("p1")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    d = Database(f"sqlite:///{tmp_path / 'shoal.db'}")
    migrations.upgrade(d)
    yield d
    d.close()


def report(
    db: Database, host: str, at: datetime, period: float, binary: str = registry.BINARY
) -> None:
    with db.core_write() as s:
        registry.report_alive(s, host, at, period, binary)


def test_each_conductor_is_up_for_three_of_its_own_heartbeats(db: Database) -> None:
    report(db, "fast", T0, 1.0)  # up until T0 + 3 s
    report(db, "slow", T0, 20.0)  # up until T0 + 60 s
    report(db, "api", T0, 5.0, registry.API)  # an API server is no conductor
    for after, live in [(0.0, 2), (3.0, 2), (3.1, 1), (60.0, 1), (60.1, 0)]:
        assert registry.live_conductors(db, T0 + timedelta(seconds=after)) == live, after
    rows = {i.conductor.host: i for i in fleet.mservices(db, ADMIN)}
    assert set(rows) == {"fast", "slow"}
    assert (rows["fast"].conductor.heartbeat_seconds, rows["slow"].conductor.heartbeat_seconds) == (
        1.0,
        20.0,
    )
    # A new report moves its window; a conductor that stops cleanly is down at once.
    report(db, "fast", T0 + timedelta(seconds=10), 1.0)
    assert registry.live_conductors(db, T0 + timedelta(seconds=12)) == 2
    registry.report_gone(db, "slow")
    assert registry.live_conductors(db, T0 + timedelta(seconds=12)) == 1
