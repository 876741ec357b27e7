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
    heartbeat_seconds: float | None = None  # the period it reports with, as it recorded
    up_until: datetime | None = None  # up until then (`up_until`), unless it reports again


def up_until(seen: datetime, heartbeat_s: float) -> datetime:
    """Until when a process last seen at `seen` that reports every `heartbeat_s` seconds
    is up: MISSED_BEATS heartbeats later (recorded in its row when it reports)."""
    return seen + timedelta(seconds=MISSED_BEATS * heartbeat_s)


def state(until: datetime | None, now: datetime) -> str:
    """`up` while `now` is at most its recorded `up_until`, else `down`."""
    return "up" if until is not None and now <= until else "down"
