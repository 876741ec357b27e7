"""The conductor registry: one `conductors` row per running conductor process, as
Magnum's `mservices` lists them, refreshed by each conductor's heartbeat."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from shoal.db.engine import Database, Executor, dialect_of, upsert
from shoal.db.tables import ConductorRow, table_of

BINARY = "shoal-conductor"


def report_alive(session: Executor, host: str, now: datetime) -> None:
    """Register or refresh this conductor in `conductors` (report_count += 1)."""
    ins = upsert(dialect_of(session), table_of(ConductorRow)).values(
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


def live_conductors(db: Database, alive_since: datetime) -> int:
    """Conductors that reported since `alive_since` and are not disabled."""
    with db.core_read() as s:
        n = s.scalar(
            select(func.count())
            .select_from(ConductorRow)
            .where(ConductorRow.last_seen_up >= alive_since, ConductorRow.disabled.is_(False))
        )
    return int(n or 0)
