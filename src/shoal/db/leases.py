"""Leases: a conductor's time-limited claim on one resource, and the conductor registry.

A lease row ("nodegroup:<uuid>", "cluster:<uuid>") is taken only when absent or
expired, in one upsert statement, so two conductor processes (or two threads)
never hold one resource at once. The holder renews its leases while it works
(heartbeat); a crashed holder's leases expire after `ttl` and any conductor may
then take over. Works on SQLite (one process) and PostgreSQL (many).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from shoal.db.tables import ConductorRow, LeaseRow

NODEGROUP = "nodegroup"
CLUSTER = "cluster"
BINARY = "shoal-conductor"


def key(kind: str, uuid: str) -> str:
    """The lease name of a resource, e.g. "nodegroup:<uuid>"."""
    return f"{kind}:{uuid}"


def _insert(session: Session):  # type: ignore[no-untyped-def]
    return pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert


def claim(session: Session, resource: str, holder: str, now: datetime, ttl: float) -> bool:
    """Take the lease on `resource` if it is free or expired; True when taken."""
    ins = _insert(session)(LeaseRow).values(
        resource=resource, holder=holder, expires_at=now + timedelta(seconds=ttl)
    )
    stmt = ins.on_conflict_do_update(
        index_elements=[LeaseRow.resource],
        set_={"holder": ins.excluded.holder, "expires_at": ins.excluded.expires_at},
        where=LeaseRow.expires_at <= now,
    ).returning(LeaseRow.resource)
    return session.execute(stmt).first() is not None


def renew(
    session: Session, holder: str, resources: Collection[str], now: datetime, ttl: float
) -> int:
    """Extend the leases `holder` still holds among `resources`; return how many."""
    if not resources:
        return 0
    result = session.execute(
        update(LeaseRow)
        .where(LeaseRow.holder == holder, LeaseRow.resource.in_(list(resources)))
        .values(expires_at=now + timedelta(seconds=ttl))
    )
    return int(getattr(result, "rowcount", 0) or 0)


def release(session: Session, holder: str, resources: Collection[str]) -> None:
    """Drop the leases `holder` holds among `resources`."""
    if resources:
        session.execute(
            delete(LeaseRow).where(
                LeaseRow.holder == holder, LeaseRow.resource.in_(list(resources))
            )
        )


def holder_of(session: Session, resource: str, now: datetime) -> str | None:
    """Who holds an unexpired lease on `resource`, if anyone."""
    return session.scalar(
        select(LeaseRow.holder).where(LeaseRow.resource == resource, LeaseRow.expires_at > now)
    )


def report_alive(session: Session, host: str, now: datetime) -> None:
    """Register or refresh this conductor in `conductors` (report_count += 1)."""
    ins = _insert(session)(ConductorRow).values(
        host=host,
        binary=BINARY,
        report_count=1,
        disabled=False,
        last_seen_up=now,
        created_at=now,
    )
    stmt = ins.on_conflict_do_update(
        index_elements=[ConductorRow.host, ConductorRow.binary],
        set_={
            "report_count": ConductorRow.report_count + 1,
            "last_seen_up": now,
            "updated_at": now,
        },
    )
    session.execute(stmt)
