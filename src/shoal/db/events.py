"""The event history of a cluster: one writer for services and the conductor."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from shoal.db import convert
from shoal.db.tables import EventRow
from shoal.db.types import utcnow
from shoal.domain.model import Event

NORMAL = "Normal"
WARNING = "Warning"


def record(
    session: Session,
    cluster_uuid: str,
    reason: str,
    message: str,
    *,
    type: str = NORMAL,
    nodegroup_uuid: str | None = None,
    node_uuid: str | None = None,
) -> None:
    """Append one event in the caller's transaction (so it lands with the change)."""
    session.add(
        EventRow(
            cluster_uuid=cluster_uuid,
            nodegroup_uuid=nodegroup_uuid,
            node_uuid=node_uuid,
            time=utcnow(),
            type=type,
            reason=reason,
            message=message,
        )
    )


def list_for_cluster(
    session: Session, cluster_uuid: str, *, after_id: int = 0, limit: int = 1000
) -> list[Event]:
    """Events of one cluster in order, those with id > after_id (for --follow)."""
    rows = session.scalars(
        select(EventRow)
        .where(EventRow.cluster_uuid == cluster_uuid, EventRow.id > after_id)
        .order_by(EventRow.id)
        .limit(limit)
    )
    return [convert.event_from_row(r) for r in rows]
