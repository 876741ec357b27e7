"""Values of the fleet views: a project's quota, a conductor as Magnum's mservices
shows it, and the rule that says whether a conductor is up."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

MISSED_BEATS = 3  # a process is down once it has missed this many heartbeats


@dataclass(frozen=True)
class Quota:
    """A project's limit on one resource (`id` None: the default, not stored)."""

    project_id: str
    resource: str
    hard_limit: int
    id: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class Conductor:
    """One conductor process (Magnum's mservice)."""

    id: int
    host: str
    binary: str
    report_count: int
    disabled: bool
    disabled_reason: str | None
    last_seen_up: datetime | None
    created_at: datetime | None
    updated_at: datetime | None


def state(seen: datetime | None, now: datetime, heartbeat_s: float) -> str:
    """`up` when last seen within MISSED_BEATS heartbeats of `now`, else `down`."""
    return "up" if seen and now - seen <= timedelta(seconds=MISSED_BEATS * heartbeat_s) else "down"
