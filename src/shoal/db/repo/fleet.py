"""Counts over the whole fleet (Magnum's stats) and the conductors (mservices), as values."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from shoal.db import registry
from shoal.db.repo import lookup
from shoal.db.tables import ClusterRow, ConductorRow, NodeGroupRow
from shoal.domain.fleet import Conductor
from shoal.domain.policy import Scope


def counts(session: Session, scope: Scope) -> tuple[int, int]:
    """Clusters and nodes (the sum of node groups' desired counts) in `scope`."""
    where = lookup.in_scope(ClusterRow.project_id, scope)
    n_clusters = session.scalar(select(func.count()).select_from(ClusterRow).where(*where))
    n_nodes = session.scalar(
        select(func.coalesce(func.sum(NodeGroupRow.node_count), 0))
        .join(ClusterRow, ClusterRow.uuid == NodeGroupRow.cluster_uuid)
        .where(*where)
    )
    return int(n_clusters or 0), int(n_nodes or 0)


def conductors(session: Session) -> list[Conductor]:
    """Every conductor process that ever reported, oldest first (with until when it is
    up, as it recorded: one query says which are)."""
    rows = session.scalars(
        select(ConductorRow).where(ConductorRow.binary == registry.BINARY).order_by(ConductorRow.id)
    )
    return [
        Conductor(
            id=r.id,
            host=r.host,
            binary=r.binary,
            report_count=r.report_count,
            disabled=r.disabled,
            disabled_reason=r.disabled_reason,
            last_seen_up=r.last_seen_up,
            heartbeat_seconds=r.heartbeat_seconds,
            up_until=r.up_until,
            created_at=r.created_at,
            updated_at=r.updated_at,
        )
        for r in rows
    ]
