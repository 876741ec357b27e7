"""Per-project quota rows (resource "Cluster")."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from shoal.db.engine import xact_lock
from shoal.db.tables import QuotaRow
from shoal.db.types import utcnow

CLUSTER = "Cluster"


# Built once: every cluster create checks the quota.
_FIND = select(QuotaRow).where(
    QuotaRow.project_id == bindparam("project_id"), QuotaRow.resource == bindparam("resource")
)


def lock_project(session: Session, project_id: str) -> None:
    """Serialize quota checks of one project until the transaction ends, so that two
    concurrent creates cannot both pass a count of limit - 1. SQLite needs nothing: its
    write transactions (BEGIN IMMEDIATE) already run one at a time."""
    xact_lock(session, f"quota:{project_id}")


def find(session: Session, project_id: str, resource: str) -> QuotaRow | None:
    return session.scalars(_FIND, {"project_id": project_id, "resource": resource}).first()


def all_rows(session: Session, project_id: str | None = None) -> list[QuotaRow]:
    stmt = select(QuotaRow).order_by(QuotaRow.id)
    if project_id is not None:
        stmt = stmt.where(QuotaRow.project_id == project_id)
    return list(session.scalars(stmt))


def upsert(session: Session, project_id: str, resource: str, hard_limit: int) -> QuotaRow:
    row = find(session, project_id, resource)
    if row is None:
        row = QuotaRow(
            project_id=project_id, resource=resource, hard_limit=hard_limit, created_at=utcnow()
        )
        session.add(row)
    else:
        row.hard_limit = hard_limit
        row.updated_at = utcnow()
    session.flush()
    return row


def remove(session: Session, row: QuotaRow) -> None:
    session.delete(row)
    session.flush()
