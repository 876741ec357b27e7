"""Facts about the database itself (`deployment_state`): today, whether
`shoal db migrate` is still filling it. A copy is marked before its first row
and unmarked after its last row is verified, so a copy killed half-way can be
told from a finished one: `shoal serve` and `shoal conductor` refuse the first
(with machines but half their rows they would replace them), and `shoal db
migrate` run again empties it and copies again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, insert, inspect, select

from shoal.db.engine import Database
from shoal.db.tables import DeploymentStateRow, table_of

COPY = "copy"
_T = table_of(DeploymentStateRow)


def mark_copy(conn: Connection, note: str, now: datetime) -> None:
    """Say (in the target's own transaction) that a copy into it has begun. The first
    thing written to a target, before its schema: the table is made if need be."""
    _T.create(conn, checkfirst=True)
    conn.execute(delete(_T).where(_T.c.key == COPY))
    conn.execute(insert(_T).values(key=COPY, value=note, updated_at=now))


def clear_copy(conn: Connection) -> None:
    """The copy is complete and verified."""
    conn.execute(delete(_T).where(_T.c.key == COPY))


def unfinished_copy(db: Database) -> str | None:
    """The note of a copy into this database that has not finished, if any."""
    with db.core_read() as s:
        if not inspect(s).has_table(_T.name):
            return None
        return s.scalar(select(_T.c.value).where(_T.c.key == COPY))
