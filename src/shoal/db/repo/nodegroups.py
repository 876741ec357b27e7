"""Node groups: insert from a plan, find, list, live node counts, desired-state writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, func, select, update
from sqlalchemy.orm import Session

from shoal.db import convert, notify
from shoal.db.records import ClusterRef
from shoal.db.repo import lookup
from shoal.db.repo.paging import Page, paginate
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow, table_of
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain import release
from shoal.domain.merge import GroupPlan
from shoal.domain.policy import Scope

_TABLE = table_of(NodeGroupRow)
# Desired-state writes of one group by uuid, built once (building and keying a
# statement costs more than running it): the columns set are the parameters'
# (`desired`), and the generation moves by one.
_TOUCH = (
    update(_TABLE)
    .where(_TABLE.c.uuid == bindparam("b_uuid"))
    .values(generation=_TABLE.c.generation + 1)
)
_WRITE_SPEC = _TOUCH.returning(*_TABLE.c)
_CLUSTERS = table_of(ClusterRow)
_SET_PROVIDERS = update(_CLUSTERS).where(_CLUSTERS.c.uuid == bindparam("b_uuid"))
SORT_KEYS = frozenset(
    {"id", "uuid", "name", "role", "node_count", "status", "created_at", "updated_at"}
)


@dataclass(frozen=True)
class Live:
    """What the node rows of one group say right now."""

    total: int = 0
    ready: int = 0
    failed: int = 0


def insert(
    session: Session,
    cluster: ClusterRef,
    plans: Sequence[GroupPlan],
    *,
    now: datetime | None = None,
    uuids: Mapping[str, str] | None = None,
) -> list[m.NodeGroup]:
    """Node groups of `cluster`, due for the conductor right away (`uuids`: by group
    name, see `new_values`); the cluster records the providers they are made in."""
    at = now or utcnow()
    rows = [
        NodeGroupRow(
            **new_values(cluster.uuid, cluster.project_id, plan, at, (uuids or {}).get(plan.name))
        )
        for plan in plans
    ]
    _add_providers(session, cluster, [plan.spec.provider for plan in plans])
    session.add_all(rows)
    session.flush()
    return [convert.nodegroup_from_row(row) for row in rows]


def _add_providers(session: Session, cluster: ClusterRef, added: list[str | None]) -> None:
    """Record the providers of new groups on their cluster (a write only when that
    changes what it records)."""
    known = None if cluster.providers is None else list(cluster.providers)
    new = release.record(known, added)
    if new != known:
        session.execute(_SET_PROVIDERS, {"b_uuid": cluster.uuid, "providers": new})


def new_values(
    cluster_uuid: str, project_id: str, plan: GroupPlan, now: datetime, uuid: str | None = None
) -> dict[str, Any]:
    """The column values of a new node group of a cluster, for an INSERT (`uuid`: the
    id of a group whose machines exist already; a new one otherwise)."""
    from shoal.db.repo.templates import new_uuid

    spec = plan.spec
    return {
        "uuid": uuid or new_uuid(),
        "cluster_uuid": cluster_uuid,
        "project_id": project_id,
        "name": plan.name,
        "role": spec.role,
        "is_default": plan.is_default,
        "node_count": spec.node_count,
        "min_node_count": spec.min_node_count,
        "max_node_count": spec.max_node_count,
        "spec": convert.ng_spec_to_json(spec),
        "provider": spec.provider,
        "source_id": plan.source_id,
        "version": spec.coe_version,
        "generation": 1,
        "observed_generation": 0,
        "status": "CREATE_IN_PROGRESS",
        "created_at": now,
        "operation_started_at": now,
        "next_reconcile_at": now,
    }


def find(session: Session, cluster_uuid: str, ident: str, for_update: bool = False) -> m.NodeGroup:
    """A group of the cluster by uuid, name or integer id (`for_update`: its row locked
    until the transaction ends)."""
    row: NodeGroupRow = lookup.find(
        session,
        NodeGroupRow,
        ident,
        kind="NodeGroup",
        plural="nodegroups",
        where=(NodeGroupRow.cluster_uuid == cluster_uuid,),
        by_int_id=True,
        for_update=for_update,
    )
    return convert.nodegroup_from_row(row)


def find_any(session: Session, scope: Scope, ident: str) -> m.NodeGroup:
    """A group of any cluster of the scope, by uuid (NGT-from-nodegroup, clones)."""
    row: NodeGroupRow = lookup.find(
        session, NodeGroupRow, ident, kind="NodeGroup", plural="nodegroups", scope=scope
    )
    return convert.nodegroup_from_row(row)


_OF_CLUSTER = (
    select(NodeGroupRow)
    .where(NodeGroupRow.cluster_uuid == bindparam("cluster_uuid"))
    .order_by(NodeGroupRow.id)
)


def of_cluster(session: Session, cluster_uuid: str) -> list[m.NodeGroup]:
    rows = session.scalars(_OF_CLUSTER, {"cluster_uuid": cluster_uuid})
    return [convert.nodegroup_from_row(r) for r in rows]


def list_page(
    session: Session, cluster_uuid: str, page: Page, role: str | None = None
) -> list[m.NodeGroup]:
    stmt = select(NodeGroupRow).where(NodeGroupRow.cluster_uuid == cluster_uuid)
    if role:
        stmt = stmt.where(NodeGroupRow.role == role)
    rows = paginate(session, stmt, NodeGroupRow, page, SORT_KEYS)
    return [convert.nodegroup_from_row(r) for r in rows]


# Built once (every GET of a cluster or a node group counts its nodes).
_LIVE = (
    select(
        NodeRow.nodegroup_uuid,
        func.count(),
        func.sum(case((NodeRow.state == m.NodeState.ACTIVE.value, 1), else_=0)),
        func.sum(case((NodeRow.state == m.NodeState.ERROR.value, 1), else_=0)),
    )
    .where(NodeRow.nodegroup_uuid.in_(bindparam("group_uuids", expanding=True)))
    .group_by(NodeRow.nodegroup_uuid)
)


def live(session: Session, group_uuids: Sequence[str]) -> dict[str, Live]:
    """Node totals per group, one grouped query."""
    if not group_uuids:
        return {}
    rows = session.execute(_LIVE, {"group_uuids": list(group_uuids)})
    out = {u: Live() for u in group_uuids}
    for gu, total, ready, failed in rows:
        out[gu] = Live(int(total), int(ready or 0), int(failed or 0))
    return out


def addresses(session: Session, group_uuid: str) -> list[str]:
    rows = session.scalars(
        select(NodeRow.address)
        .where(NodeRow.nodegroup_uuid == group_uuid, NodeRow.address.is_not(None))
        .order_by(NodeRow.id)
    )
    return [a for a in rows if a]


def write_spec(
    session: Session, uuid: str, spec: m.NodeGroupSpec, status: str, now: datetime
) -> m.NodeGroup:
    """Store a new desired spec: bump generation, set status, wake the conductor. One
    UPDATE, which returns the group as it now is."""
    values: dict[str, Any] = {
        "role": spec.role,
        "node_count": spec.node_count,
        "min_node_count": spec.min_node_count,
        "max_node_count": spec.max_node_count,
        "spec": convert.ng_spec_to_json(spec),
    }
    if spec.coe_version:
        values["version"] = spec.coe_version
    row = session.execute(_WRITE_SPEC, desired(uuid, status, now, values)).one()
    notify.request(session)  # a statement, not a flush: the session's flush hook misses it
    return convert.nodegroup_from_row(row)


def touch(
    session: Session, uuid: str, status: str, now: datetime, *, deleting: bool = False
) -> None:
    """New desired state: bump generation, set status, wake the conductor (`deleting`:
    the group is to go)."""
    session.execute(_TOUCH, desired(uuid, status, now, {"deleting": True} if deleting else {}))
    notify.request(session)


def desired(uuid: str, status: str, now: datetime, values: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a desired-state write of cluster or node group `uuid` (a
    statement that moves its generation by one): `status`, due for the conductor now,
    and `values` (by column)."""
    return {
        "b_uuid": uuid,
        "status": status,
        "status_reason": None,
        "operation_started_at": now,
        "next_reconcile_at": now,
        "updated_at": now,
        **values,
    }


def count_by_provider(session: Session, defaults: set[str]) -> dict[str, int]:
    """Node groups per provider (groups with none count for each name in `defaults`)."""
    rows = session.execute(
        select(NodeGroupRow.provider, func.count()).group_by(NodeGroupRow.provider)
    ).all()
    out: dict[str, int] = {}
    for name, n in rows:
        for key in [name] if name is not None else sorted(defaults):
            out[key] = out.get(key, 0) + int(n)
    return out


def targets(session: Session, cluster_uuid: str, ident: str | None) -> list[m.NodeGroup]:
    """The node group `ident` names, or every group of the cluster not being deleted
    (None), each locked for update: what a cluster-wide action acts on."""
    if ident is not None:
        return [find(session, cluster_uuid, ident, for_update=True)]
    return [
        find(session, cluster_uuid, g.uuid, for_update=True)
        for g in of_cluster(session, cluster_uuid)
        if not g.deleting
    ]


def any_exists(session: Session, uuids: set[str]) -> bool:
    """Whether a node group has one of `uuids`."""
    found = session.scalar(select(NodeGroupRow.uuid).where(NodeGroupRow.uuid.in_(uuids)))
    return found is not None


def names_in(session: Session, cluster_uuid: str) -> set[str]:
    """The names the node groups of a cluster have taken."""
    query = select(NodeGroupRow.name).where(NodeGroupRow.cluster_uuid == cluster_uuid)
    return set(session.scalars(query))
