"""Clusters: insert with their node groups, read with derived counts, find for a
change (a `ClusterRef`), and the desired-state writes by uuid (touch, health, delete)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, case, func, select, update
from sqlalchemy import insert as sql_insert
from sqlalchemy.orm import Session

from shoal.db import convert, notify
from shoal.db.records import ClusterRef, Health
from shoal.db.repo import lookup, nodegroups
from shoal.db.repo.paging import Page, paginate
from shoal.db.repo.templates import new_uuid
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow, table_of
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain import release
from shoal.domain.errors import Conflict
from shoal.domain.merge import GroupPlan
from shoal.domain.policy import Scope

SORT_KEYS = frozenset({"id", "uuid", "name", "status", "created_at", "updated_at"})
# A new cluster's first pass waits for its node groups: the first pass of its master
# group pokes it (progress, or a status change when it has no node to add), and a
# pass before that would find nothing observed. This due time is only the safety net:
# under a backlog of new clusters, a shorter one made a pass that found nothing for
# every cluster whose groups had not been reached yet.
FIRST_PASS_AFTER = timedelta(seconds=10)


@dataclass(frozen=True)
class Counts:
    """Derived from node groups: workers (non-master) and masters."""

    node_count: int = 0
    master_count: int = 0


def _find(session: Session, scope: Scope, ident: str, for_update: bool) -> ClusterRow:
    row: ClusterRow = lookup.find(
        session,
        ClusterRow,
        ident,
        kind="Cluster",
        plural="clusters",
        scope=scope,
        for_update=for_update,
    )
    return row


def find(session: Session, scope: Scope, ident: str, for_update: bool = False) -> ClusterRef:
    """The cluster `ident` names (uuid or name) in the scope; `for_update`: its row
    locked until the transaction ends."""
    return convert.cluster_ref_from_row(_find(session, scope, ident, for_update))


def find_changeable(session: Session, scope: Scope, ident: str) -> ClusterRef:
    """The cluster, locked for a desired-state change; Conflict once it is being deleted
    (a change can no longer apply, and must not flip DELETE_IN_PROGRESS back)."""
    cluster = find(session, scope, ident, for_update=True)
    if cluster.deleting:
        raise Conflict(f"Cluster {cluster.name} is being deleted")
    return cluster


def by_uuid(session: Session, uuid: str) -> ClusterRef | None:
    """The cluster whose uuid is `uuid`, in any project, deleting or not."""
    row = session.scalars(select(ClusterRow).where(ClusterRow.uuid == uuid)).first()
    return convert.cluster_ref_from_row(row) if row is not None else None


def get_by_uuid(session: Session, uuid: str) -> m.Cluster:
    """The cluster whose uuid is `uuid` (one the caller found already)."""
    return convert.cluster_from_row(
        session.scalars(select(ClusterRow).where(ClusterRow.uuid == uuid)).one()
    )


def get(session: Session, scope: Scope, ident: str) -> m.Cluster:
    return convert.cluster_from_row(_find(session, scope, ident, for_update=False))


def made_from_template(session: Session, scope: Scope, template_uuid: str) -> m.Cluster | None:
    """The newest cluster of the scope made from template `template_uuid` (its copy of
    the template's attributes answers for a template deleted since), or None."""
    if not lookup.is_uuid(template_uuid):
        return None
    stmt = (
        select(ClusterRow)
        .where(
            ClusterRow.cluster_template_id == template_uuid,
            *lookup.in_scope(ClusterRow.project_id, scope),
        )
        .order_by(ClusterRow.created_at.desc(), ClusterRow.id.desc())
        .limit(1)
    )
    row = session.scalars(stmt).first()
    return convert.cluster_from_row(row) if row is not None else None


def list_page(session: Session, scope: Scope, page: Page) -> list[m.Cluster]:
    """One page of the scope's clusters (plain rows, not ORM objects: status polls
    list every cluster)."""
    stmt = select(*ClusterRow.__table__.c).where(*lookup.in_scope(ClusterRow.project_id, scope))
    rows = paginate(session, stmt, ClusterRow, page, SORT_KEYS, entities=False)
    return [convert.cluster_from_row(r) for r in rows]


# The reads of a cluster's GET, built once: building and keying a statement cost
# more of the GIL than running it (a GET of a 1,000-node cluster under 16 readers).
_IS_MASTER = NodeGroupRow.role == m.ROLE_MASTER
_COUNTS = (
    select(
        NodeGroupRow.cluster_uuid,
        func.coalesce(func.sum(case((_IS_MASTER, 0), else_=NodeGroupRow.node_count)), 0),
        func.coalesce(func.sum(case((_IS_MASTER, NodeGroupRow.node_count), else_=0)), 0),
    )
    .where(
        NodeGroupRow.cluster_uuid.in_(bindparam("cluster_uuids", expanding=True)),
        NodeGroupRow.deleting.is_(False),
    )
    .group_by(NodeGroupRow.cluster_uuid)
)
_MASTER_GROUPS = select(NodeGroupRow.uuid).where(
    NodeGroupRow.cluster_uuid == bindparam("cluster_uuid"), _IS_MASTER
)
_ADDRESSES = (
    select(NodeRow.address, NodeRow.nodegroup_uuid)
    .where(NodeRow.cluster_uuid == bindparam("cluster_uuid"), NodeRow.address.is_not(None))
    .order_by(NodeRow.id)
)


def counts(session: Session, cluster_uuids: Sequence[str]) -> dict[str, Counts]:
    """node_count / master_count per cluster with one grouped query."""
    if not cluster_uuids:
        return {}
    rows = session.execute(_COUNTS, {"cluster_uuids": list(cluster_uuids)})
    out = {u: Counts() for u in cluster_uuids}
    for cu, workers, masters in rows:
        out[cu] = Counts(int(workers), int(masters))
    return out


def addresses(session: Session, cluster_uuid: str) -> tuple[list[str], list[str]]:
    """(worker addresses, master addresses) of a cluster's nodes, one query."""
    key = {"cluster_uuid": cluster_uuid}
    master_groups = set(session.scalars(_MASTER_GROUPS, key))
    workers: list[str] = []
    masters: list[str] = []
    for addr, group in session.execute(_ADDRESSES, key):
        if addr is not None:  # always: the query leaves out NULL addresses (narrows the type)
            (masters if group in master_groups else workers).append(addr)
    return workers, masters


_COUNT_IN_PROJECT = select(func.count()).where(ClusterRow.project_id == bindparam("project_id"))


def count_in_project(session: Session, project_id: str) -> int:
    """Clusters of the project (the quota check of every create: a statement built once)."""
    return int(session.scalar(_COUNT_IN_PROJECT, {"project_id": project_id}) or 0)


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
    uuid: str | None = None,
    group_uuids: Mapping[str, str] | None = None,
) -> m.Cluster:
    """The cluster and its node groups, due for the conductor right away. Core
    inserts (one for the cluster, one for its groups): no ORM objects to build
    and flush for rows this request never reads again. `uuid` and `group_uuids`
    (by group name): the ids of a cluster whose machines exist already (adoption);
    new ones otherwise."""
    now = utcnow()
    row = session.execute(
        _INSERT_CLUSTER,
        {
            "uuid": uuid or new_uuid(),
            "project_id": project_id,
            "user_id": user_id,
            "name": name,
            "attrs": attrs,
            "cluster_template_id": cluster_template_id,
            "source_id": source_id,
            "generation": 1,
            "observed_generation": 0,
            "status": "CREATE_IN_PROGRESS",
            "created_at": now,
            "operation_started_at": now,
            "next_reconcile_at": now + FIRST_PASS_AFTER,
            "providers": release.record([], (plan.spec.provider for plan in groups)),
        },
    ).one()
    # Masters first: their lower ids put them first in the conductor's claim order
    # (due time, then id), so the control plane boots before the workers queue up.
    ordered = sorted(groups, key=lambda plan: plan.spec.role != m.ROLE_MASTER)
    if ordered:
        session.execute(
            sql_insert(NodeGroupRow),
            [
                nodegroups.new_values(
                    row.uuid, project_id, plan, now, (group_uuids or {}).get(plan.name)
                )
                for plan in ordered
            ],
        )
    notify.request(session)  # Core writes: the session's flush hook does not see them
    return convert.cluster_from_row(row)


_INSERT_CLUSTER = sql_insert(table_of(ClusterRow)).returning(*table_of(ClusterRow).c)
# Writes of one cluster by uuid, built once: the columns set are the parameters'.
_CL = table_of(ClusterRow)
_SET = update(_CL).where(_CL.c.uuid == bindparam("b_uuid"))
_TOUCH = _SET.values(generation=_CL.c.generation + 1)  # with `nodegroups.desired`


def touch(
    session: Session,
    uuid: str,
    status: str,
    now: datetime,
    *,
    attrs: dict[str, Any] | None = None,
    cluster_template_id: str | None = None,
    health: Health | None = None,
) -> None:
    """New desired state: bump generation, set status, wake the conductor; with new
    `attrs`, the template it now follows, new `health` when given. One UPDATE."""
    values: dict[str, Any] = {}
    if attrs is not None:
        values["attrs"] = attrs
    if cluster_template_id is not None:
        values["cluster_template_id"] = cluster_template_id
    if health is not None:
        values |= _health_values(health)
    _touch(session, uuid, status, now, values)


def _touch(session: Session, uuid: str, status: str, now: datetime, values: dict[str, Any]) -> None:
    session.execute(_TOUCH, nodegroups.desired(uuid, status, now, values))
    notify.request(session)  # a statement, not a flush: the session's flush hook misses it


def _health_values(health: Health) -> dict[str, Any]:
    return {"health_status": health.status, "health_status_reason": health.reason}


def set_health(session: Session, uuid: str, health: Health, now: datetime) -> None:
    """Magnum's health fields as a client sets them: no new desired state."""
    session.execute(_SET, {"b_uuid": uuid, "updated_at": now, **_health_values(health)})


def mark_deleting(session: Session, uuid: str, now: datetime) -> None:
    """The cluster and all its node groups go DELETE_IN_PROGRESS in one statement each."""
    _touch(session, uuid, "DELETE_IN_PROGRESS", now, {"deleting": True})
    session.execute(
        update(NodeGroupRow)
        .where(NodeGroupRow.cluster_uuid == uuid)
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
