"""The process registry: one `conductors` row per running shoal process, refreshed by
its heartbeat. Conductors (`binary` shoal-conductor) are what Magnum's `mservices`
lists and what share the work; API servers report too (shoal-api), so that
`shoal db migrate` can refuse while any shoal process is alive."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update

from shoal.db.engine import Database, Executor, dialect_of, upsert
from shoal.db.tables import ConductorRow, table_of
from shoal.domain import fleet

BINARY = "shoal-conductor"
API = "shoal-api"


def report_alive(
    session: Executor, host: str, now: datetime, period: float, binary: str = BINARY
) -> None:
    """Register or refresh this process in `conductors` (report_count += 1), with the
    period it reports with and until when that makes it up (domain/fleet.py)."""
    until = fleet.up_until(now, period)
    ins = upsert(dialect_of(session), table_of(ConductorRow)).values(
        host=host,
        binary=binary,
        report_count=1,
        disabled=False,
        last_seen_up=now,
        heartbeat_seconds=period,
        up_until=until,
        created_at=now,
    )
    stmt = ins.on_conflict_do_update(
        index_elements=[ConductorRow.host, ConductorRow.binary],
        set_={
            "report_count": ConductorRow.report_count + 1,
            "last_seen_up": now,
            "heartbeat_seconds": period,
            "up_until": until,
            "updated_at": now,
        },
    )
    session.execute(stmt)


def report_gone(db: Database, host: str, binary: str = BINARY) -> None:
    """A process that stops cleanly says so: it no longer counts as alive."""
    with db.core_write() as s:
        s.execute(
            update(ConductorRow)
            .where(ConductorRow.host == host, ConductorRow.binary == binary)
            .values(last_seen_up=None, up_until=None)
        )


def live_conductors(db: Database, now: datetime) -> int:
    """Conductors up at `now` (by the period each recorded) and not disabled."""
    with db.core_read() as s:
        n = s.scalar(
            select(func.count())
            .select_from(ConductorRow)
            .where(
                ConductorRow.binary == BINARY,
                ConductorRow.up_until >= now,
                ConductorRow.disabled.is_(False),
            )
        )
    return int(n or 0)


def live_processes(db: Database, alive_since: datetime) -> list[tuple[str, str, datetime]]:
    """Every shoal process (host, binary, last report) that reported since `alive_since`."""
    with db.core_read() as s:
        rows = s.execute(
            select(ConductorRow.host, ConductorRow.binary, ConductorRow.last_seen_up).where(
                ConductorRow.last_seen_up >= alive_since
            )
        ).all()
    return [(h, b, t) for h, b, t in rows if t is not None]
