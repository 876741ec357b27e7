"""Each provider's last check by a conductor: reachable or not (and why), and what it
offers. Conductors write it (their housekeeping checks every provider); the API
reads it, so that it never calls a cloud itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from shoal.db.engine import Database, dialect_of, upsert
from shoal.db.tables import ProviderRow, table_of


@dataclass(frozen=True)
class Check:
    """One provider as a conductor last saw it."""

    name: str
    driver: str
    reachable: bool
    reason: str | None
    facts: Mapping[str, Any]  # zones, flavors, images, features
    checked_at: datetime
    checked_by: str
    sweeper: str | None = None  # why the sweeper stopped deleting its machines, if it did


def record(db: Database, check: Check) -> None:
    """Store a provider's check (one row per provider: the latest wins)."""
    values = {
        "name": check.name,
        "driver": check.driver,
        "reachable": check.reachable,
        "reason": check.reason,
        "facts": dict(check.facts),
        "checked_at": check.checked_at,
        "checked_by": check.checked_by,
    }
    with db.core_write() as s:
        ins = upsert(dialect_of(s), table_of(ProviderRow)).values(**values)
        update = {k: v for k, v in values.items() if k != "name"}
        s.execute(ins.on_conflict_do_update(index_elements=[ProviderRow.name], set_=update))


def record_sweep(db: Database, name: str, halted: str | None) -> None:
    """The sweeper's state for provider `name`: why it stopped deleting, or None."""
    t = table_of(ProviderRow)
    with db.core_write() as s:
        s.execute(update(t).where(t.c.name == name).values(sweeper=halted))


def latest(db: Database) -> dict[str, Check]:
    """Every provider's last check, by name."""
    with db.core_read() as s:
        rows = s.execute(select(*table_of(ProviderRow).c)).all()
    return {
        r.name: Check(
            r.name, r.driver, r.reachable, r.reason, r.facts, r.checked_at, r.checked_by, r.sweeper
        )
        for r in rows
    }
