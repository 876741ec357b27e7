"""Clusters: insert with their node groups, read with derived counts, mark deleting."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from shoal.db import convert
from shoal.db.repo import lookup, nodegroups
from shoal.db.repo.paging import Page, paginate
from shoal.db.repo.templates import new_uuid
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain.merge import GroupPlan

SORT_KEYS = frozenset({"id", "uuid", "name", "status", "created_at", "updated_at"})


@dataclass(frozen=True)
class Counts:
    """Derived from node groups: workers (non-master) and masters."""

    node_count: int = 0
    master_count: int = 0


def find_row(session: Session, project_id: str, ident: str, for_update: bool = False) -> ClusterRow:
    row: ClusterRow = lookup.find(
        session,
        ClusterRow,
        ident,
        kind="Cluster",
        plural="clusters",
        where=(ClusterRow.project_id == project_id,),
        for_update=for_update,
    )
    return row


def get(session: Session, project_id: str, ident: str) -> m.Cluster:
    return convert.cluster_from_row(find_row(session, project_id, ident))


def list_page(session: Session, project_id: str, page: Page) -> list[m.Cluster]:
    stmt = select(ClusterRow).where(ClusterRow.project_id == project_id)
    return [
        convert.cluster_from_row(r) for r in paginate(session, stmt, ClusterRow, page, SORT_KEYS)
    ]


def counts(session: Session, cluster_uuids: Sequence[str]) -> dict[str, Counts]:
    """node_count / master_count per cluster with one grouped query."""
    if not cluster_uuids:
        return {}
    is_master = NodeGroupRow.role == m.ROLE_MASTER
    rows = session.execute(
        select(
            NodeGroupRow.cluster_uuid,
            func.coalesce(func.sum(case((is_master, 0), else_=NodeGroupRow.node_count)), 0),
            func.coalesce(func.sum(case((is_master, NodeGroupRow.node_count), else_=0)), 0),
        )
        .where(NodeGroupRow.cluster_uuid.in_(cluster_uuids), NodeGroupRow.deleting.is_(False))
        .group_by(NodeGroupRow.cluster_uuid)
    )
    out = {u: Counts() for u in cluster_uuids}
    for cu, workers, masters in rows:
        out[cu] = Counts(int(workers), int(masters))
    return out


def addresses(session: Session, cluster_uuid: str) -> tuple[list[str], list[str]]:
    """(worker addresses, master addresses) of a cluster's nodes, one query."""
    master_groups = set(
        session.scalars(
            select(NodeGroupRow.uuid).where(
                NodeGroupRow.cluster_uuid == cluster_uuid, NodeGroupRow.role == m.ROLE_MASTER
            )
        )
    )
    rows = session.execute(
        select(NodeRow.address, NodeRow.nodegroup_uuid)
        .where(NodeRow.cluster_uuid == cluster_uuid, NodeRow.address.is_not(None))
        .order_by(NodeRow.id)
    )
    workers: list[str] = []
    masters: list[str] = []
    for addr, group in rows:
        (masters if group in master_groups else workers).append(addr)
    return workers, masters


def count_in_project(session: Session, project_id: str) -> int:
    return int(session.scalar(select(func.count()).where(ClusterRow.project_id == project_id)) or 0)


def insert(
    session: Session,
    *,
    project_id: str,
    user_id: str,
    name: str,
    attrs: dict[str, Any],
    groups: Sequence[GroupPlan],
    cluster_template_id: str | None,
    source_id: str | None,
) -> m.Cluster:
    """The cluster and its node groups, due for the conductor right away."""
    now = utcnow()
    row = ClusterRow(
        uuid=new_uuid(),
        project_id=project_id,
        user_id=user_id,
        name=name,
        attrs=attrs,
        cluster_template_id=cluster_template_id,
        source_id=source_id,
        generation=1,
        observed_generation=0,
        status="CREATE_IN_PROGRESS",
        created_at=now,
        operation_started_at=now,
        next_reconcile_at=now,
    )
    session.add(row)
    session.flush()
    for plan in groups:
        nodegroups.insert(session, row, plan, now=now)
    return convert.cluster_from_row(row)


def touch(session: Session, row: ClusterRow, status: str, now: datetime, **values: Any) -> None:
    """New desired state: bump generation, set status, wake the conductor."""
    row.generation = row.generation + 1
    row.status = status
    row.status_reason = None
    row.operation_started_at = now
    row.next_reconcile_at = now
    row.updated_at = now
    for k, x in values.items():
        setattr(row, k, x)
    session.flush()


def mark_deleting(session: Session, row: ClusterRow, now: datetime) -> None:
    """The cluster and all its node groups go DELETE_IN_PROGRESS in one statement each."""
    touch(session, row, "DELETE_IN_PROGRESS", now, deleting=True)
    session.execute(
        update(NodeGroupRow)
        .where(NodeGroupRow.cluster_uuid == row.uuid)
        .values(
            deleting=True,
            status="DELETE_IN_PROGRESS",
            status_reason=None,
            generation=NodeGroupRow.generation + 1,
            operation_started_at=now,
            next_reconcile_at=now,
            updated_at=now,
        )
    )
