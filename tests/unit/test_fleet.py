"""A conductor is up until three of its own heartbeats after its last report (recorded in
its row when it reports: mservices' state and the live count read that)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shoal.domain import fleet

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seen_ago", "heartbeat", "state"),
    [
        (None, 10.0, "down"),  # never reported (or reported gone)
        (0.0, 10.0, "up"),
        (29.9, 10.0, "up"),
        (30.0, 10.0, "up"),  # exactly three beats: still up
        (30.1, 10.0, "down"),
        (0.7, 0.2, "down"),  # a short heartbeat: three beats are 0.6 s
        (100.0, 60.0, "up"),  # a long one (its own period, whatever this process's)
    ],
)
def test_state(seen_ago: float | None, heartbeat: float, state: str) -> None:
    until = (
        None if seen_ago is None else fleet.up_until(NOW - timedelta(seconds=seen_ago), heartbeat)
    )
    assert fleet.state(until, NOW) == state
