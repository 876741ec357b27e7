"""Per-project quota rows (resource "Cluster")."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from shoal.db.engine import xact_lock
from shoal.db.tables import QuotaRow
from shoal.db.types import utcnow
from shoal.domain.fleet import Quota

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


def value(row: QuotaRow) -> Quota:
    return Quota(
        project_id=row.project_id,
        resource=row.resource,
        hard_limit=row.hard_limit,
        id=row.id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def get(session: Session, project_id: str, resource: str) -> Quota | None:
    """The stored quota, as a value."""
    row = find(session, project_id, resource)
    return value(row) if row is not None else None


def listed(session: Session, project_id: str | None = None) -> list[Quota]:
    """Every stored quota (of one project when named), as values, oldest first."""
    return [value(r) for r in all_rows(session, project_id)]


def put(session: Session, project_id: str, resource: str, hard_limit: int) -> Quota:
    """Create or change a quota; the stored value."""
    return value(upsert(session, project_id, resource, hard_limit))


def delete(session: Session, project_id: str, resource: str) -> bool:
    """Remove a quota; False when there was none."""
    row = find(session, project_id, resource)
    if row is None:
        return False
    remove(session, row)
    return True
