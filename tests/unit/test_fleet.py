"""A conductor is up while it was seen within three heartbeats (mservices' state)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shoal.domain import fleet

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seen_ago", "heartbeat", "state"),
    [
        (None, 10.0, "down"),  # never reported
        (0.0, 10.0, "up"),
        (29.9, 10.0, "up"),
        (30.0, 10.0, "up"),  # exactly three beats: still up
        (30.1, 10.0, "down"),
        (0.7, 0.2, "down"),  # a short heartbeat: three beats are 0.6 s
    ],
)
def test_state(seen_ago: float | None, heartbeat: float, state: str) -> None:
    seen = None if seen_ago is None else NOW - timedelta(seconds=seen_ago)
    assert fleet.state(seen, NOW, heartbeat) == state
