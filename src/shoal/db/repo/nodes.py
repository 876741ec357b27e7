"""Node queries for the API (nodes are written by the conductor), and `to_delete` marks."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from shoal.db import convert
from shoal.db.repo.paging import Page, paginate
from shoal.db.tables import NodeGroupRow, NodeRow
from shoal.domain import model as m

SORT_KEYS = frozenset({"id", "uuid", "name", "state", "created_at", "ready_at"})


def list_page(
    session: Session, cluster_uuid: str, page: Page, nodegroup_uuid: str | None = None
) -> list[tuple[m.Node, str, str]]:
    """(node, nodegroup name, role) for one page of a cluster's nodes (plain rows,
    not ORM objects: a page of 1,000 is the hot read of a big cluster)."""
    stmt = select(*NodeRow.__table__.c).where(NodeRow.cluster_uuid == cluster_uuid)
    if nodegroup_uuid:
        stmt = stmt.where(NodeRow.nodegroup_uuid == nodegroup_uuid)
    rows = paginate(session, stmt, NodeRow, page, SORT_KEYS, entities=False)
    groups = {
        u: (n, r)
        for u, n, r in session.execute(
            select(NodeGroupRow.uuid, NodeGroupRow.name, NodeGroupRow.role).where(
                NodeGroupRow.uuid.in_({r.nodegroup_uuid for r in rows})
            )
        )
    }
    out = []
    for r in rows:
        name, role = groups.get(r.nodegroup_uuid, ("", ""))
        out.append((convert.node_from_row(r), name, role))
    return out


def of_group(session: Session, group_uuid: str) -> list[m.Node]:
    """The group's nodes ordered by creation (the order integer indexes refer to)."""
    rows = session.scalars(
        select(NodeRow)
        .where(NodeRow.nodegroup_uuid == group_uuid)
        .order_by(NodeRow.created_at, NodeRow.id)
    )
    return [convert.node_from_row(r) for r in rows]


def vm_holders(session: Session, cluster_uuid: str) -> list[m.Node]:
    """The cluster's nodes that hold a VM slot of a virt host."""
    rows = session.scalars(
        select(NodeRow).where(NodeRow.cluster_uuid == cluster_uuid, NodeRow.vm_slot.is_not(None))
    )
    return [convert.node_from_row(r) for r in rows]


def mark_to_delete(session: Session, node_uuids: Sequence[str]) -> None:
    """Mark named nodes for removal (the only node write the API makes)."""
    if node_uuids:
        session.execute(update(NodeRow).where(NodeRow.uuid.in_(node_uuids)).values(to_delete=True))


def total(session: Session) -> int:
    from sqlalchemy import func

    return int(session.scalar(select(func.count()).select_from(NodeRow)) or 0)
