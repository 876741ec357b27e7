"""Leases: a conductor's time-limited claim on one resource.

A lease row ("nodegroup:<uuid>", "cluster:<uuid>") is taken only when absent or
expired, in one upsert statement, so two conductor processes (or two threads)
never hold one resource at once. The holder renews its leases while it works
(heartbeat); a crashed holder's leases expire after `ttl` and any conductor may
then take over. Works on SQLite (one process) and PostgreSQL (many).
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, update

from shoal.db.engine import Executor, dialect_of, upsert
from shoal.db.tables import LeaseRow, table_of


class LeaseLost(Exception):
    """This conductor no longer holds the lease it is writing under: another one took
    the resource over (ours expired while this process was paused). The write is
    rolled back; the new holder works from what is committed."""


def key(kind: str, uuid: str) -> str:
    """The lease name of a resource, e.g. "nodegroup:<uuid>"."""
    return f"{kind}:{uuid}"


# Core: no ORM bulk-insert machinery for one row.
_LEASES = table_of(LeaseRow)


@functools.cache
def _claim_stmt(dialect: str) -> Any:
    """The upsert that takes a lease (parameters: resource, holder, until, now),
    built once per dialect: claims are frequent and the statement is the same."""
    table = _LEASES
    ins = upsert(dialect, table).values(
        resource=bindparam("resource"), holder=bindparam("holder"), expires_at=bindparam("until")
    )
    return ins.on_conflict_do_update(
        index_elements=[LeaseRow.resource],
        set_={"holder": ins.excluded.holder, "expires_at": ins.excluded.expires_at},
        where=table.c.expires_at <= bindparam("now", type_=table.c.expires_at.type),
    ).returning(table.c.resource)


_RELEASE = delete(LeaseRow).where(
    LeaseRow.holder == bindparam("holder"),
    LeaseRow.resource.in_(bindparam("resources", expanding=True)),
)


def claim(session: Executor, resource: str, holder: str, now: datetime, ttl: float) -> bool:
    """Take the lease on `resource` if it is free or expired; True when taken."""
    params = {
        "resource": resource,
        "holder": holder,
        "until": now + timedelta(seconds=ttl),
        "now": now,
    }
    stmt = _claim_stmt(dialect_of(session))
    return session.execute(stmt, params).first() is not None


def renew(
    session: Executor, holder: str, resources: Collection[str], now: datetime, ttl: float
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


def release(session: Executor, holder: str, resources: Collection[str]) -> None:
    """Drop the leases `holder` holds among `resources`."""
    if resources:
        session.execute(_RELEASE, {"holder": holder, "resources": list(resources)})


_HOLDERS = select(LeaseRow.resource, LeaseRow.holder).where(
    LeaseRow.resource.in_(bindparam("resources", expanding=True))
)
_HOLDERS_LOCKED = _HOLDERS.with_for_update()


def fence_all(s: Connection, resources: Collection[str], holder: str) -> None:
    """Raise LeaseLost unless `holder` still holds every one of `resources`. Called
    inside the write it guards: on PostgreSQL the lease rows stay locked until that
    write commits, so a takeover waits for it and then sees its result (a fenced
    write)."""
    stmt = _HOLDERS if s.dialect.name == "sqlite" else _HOLDERS_LOCKED
    held = {r.resource: r.holder for r in s.execute(stmt, {"resources": list(resources)})}
    for r in resources:
        if held.get(r) != holder:
            raise LeaseLost(r)
