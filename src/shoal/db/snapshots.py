"""Snapshots for the conductor's passes: everything one pass over a node group or a
cluster needs, read in one consistent transaction, and the small lookups a pass
makes (names taken in a cluster, which machines have a row).

The statements every pass runs are built once with parameters: building and
hashing a statement costs more than SQLite running it on a few rows, and a small
cluster pays it per pass.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from shoal.db import convert
from shoal.db.engine import Database
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow, NodeTaskRow, OperationRow, table_of
from shoal.domain import health
from shoal.domain import model as m

CHUNK = 500
_CL, _NG, _NODE = (table_of(r) for r in (ClusterRow, NodeGroupRow, NodeRow))
# A node group with the facts of its cluster that its passes need (one statement).
_GROUP = (
    select(
        *_NG.c,
        _CL.c.name.label("cluster_name"),
        _CL.c.attrs.label("cluster_attrs"),
        _CL.c.deleting.label("cluster_deleting"),
        _CL.c.api_address.label("cluster_api_address"),
    )
    .join(_CL, _CL.c.uuid == _NG.c.cluster_uuid)
    .where(_NG.c.uuid.in_(bindparam("uuids", expanding=True)))
)
_CLUSTER = select(*_CL.c).where(_CL.c.uuid == bindparam("uuid"))
_OP, _TASK = table_of(OperationRow), table_of(NodeTaskRow)
_RUNNING_OPS = select(*_OP.c).where(
    _OP.c.nodegroup_uuid.in_(bindparam("uuids", expanding=True)), _OP.c.state == "RUNNING"
)
_OP_TASKS = (
    select(*_TASK.c)
    .where(_TASK.c.operation_uuid.in_(bindparam("ops", expanding=True)))
    .order_by(_TASK.c.id)
)
_GROUP_NODES = (
    select(*_NODE.c)
    .where(_NODE.c.nodegroup_uuid.in_(bindparam("uuids", expanding=True)))
    .order_by(_NODE.c.id)
)
_CLUSTER_GROUPS = (
    select(
        _NG.c.uuid,
        _NG.c.name,
        _NG.c.role,
        _NG.c.status,
        _NG.c.status_reason,
        _NG.c.node_count,
        _NG.c.deleting,
        _NG.c.provider,
        _NG.c.conditions,
    )
    .where(_NG.c.cluster_uuid == bindparam("uuid"))
    .order_by(_NG.c.id)
)
_IN_GROUPS = _NODE.c.nodegroup_uuid.in_(bindparam("groups", expanding=True))
_MASTER_LIMIT = 64  # more masters than any etcd cluster runs
# The ready nodes of some groups: how many (a window count, taken before the
# limit) and their addresses, oldest first, those without one last.
_READY_IN_GROUPS = (
    select(_NODE.c.address, func.count().over().label("ready"))
    .where(_IN_GROUPS, _NODE.c.state == "ACTIVE")
    .order_by(_NODE.c.address.is_(None), _NODE.c.created_at, _NODE.c.id)
    .limit(_MASTER_LIMIT)
)
_TAKEN_NAMES = select(_NODE.c.name).where(
    _NODE.c.name.in_(bindparam("names", expanding=True)),
    _NODE.c.cluster_uuid == bindparam("cluster"),
)


@dataclass(frozen=True)
class GroupSnapshot:
    """Everything one node group pass needs, read in one consistent transaction."""

    group: m.NodeGroup
    cluster_name: str
    cluster_attrs: dict[str, Any]
    cluster_deleting: bool
    operation_started_at: datetime | None
    nodes: list[m.Node]
    memory: health.GroupMemory = health.GroupMemory()
    operation: m.Operation | None = None  # the operation under way on the group, if any
    tasks: tuple[m.NodeTask, ...] = ()  # its tasks
    cluster_api_address: str | None = None  # where its cluster's API server answers


@dataclass(frozen=True)
class GroupSummary:
    uuid: str
    name: str
    role: str
    status: str
    status_reason: str | None
    node_count: int
    deleting: bool
    provider: str | None = None  # None: the default provider
    conditions: tuple[m.Condition, ...] = ()


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything one cluster pass needs."""

    cluster: m.Cluster
    operation_started_at: datetime | None
    groups: list[GroupSummary]
    masters_total: int
    masters_ready: int
    master_addresses: tuple[str, ...]  # of ready masters, oldest first


def load_groups(db: Database, uuids: Collection[str]) -> dict[str, GroupSnapshot]:
    """`load_group` of several groups in one snapshot (two statements); the groups
    that are gone, or whose cluster is, are left out."""
    with db.core_read(snapshot=True) as s:
        groups = s.execute(_GROUP, {"uuids": list(uuids)}).all()
        if not groups:
            return {}
        nodes: dict[str, list[m.Node]] = {g.uuid: [] for g in groups}
        for n in s.execute(_GROUP_NODES, {"uuids": list(nodes)}):
            nodes[n.nodegroup_uuid].append(convert.node_from_row(n))
        running = {
            r.nodegroup_uuid: convert.operation_from_row(r)
            for r in s.execute(_RUNNING_OPS, {"uuids": list(nodes)})
        }
        tasks: dict[str, list[m.NodeTask]] = {}
        if running:
            ops = [o.uuid for o in running.values()]
            for t in s.execute(_OP_TASKS, {"ops": ops}):
                tasks.setdefault(t.operation_uuid, []).append(convert.task_from_row(t))
        return {
            ng.uuid: GroupSnapshot(
                group=convert.nodegroup_from_row(ng),
                cluster_name=ng.cluster_name,
                cluster_attrs=dict(ng.cluster_attrs or {}),
                cluster_deleting=ng.cluster_deleting,
                operation_started_at=ng.operation_started_at,
                nodes=nodes[ng.uuid],
                memory=health.GroupMemory.from_json(ng.memory),
                operation=running.get(ng.uuid),
                tasks=tuple(tasks.get(running[ng.uuid].uuid, ())) if ng.uuid in running else (),
                cluster_api_address=ng.cluster_api_address,
            )
            for ng in groups
        }


def load_clusters(db: Database, uuids: Collection[str]) -> dict[str, ClusterSnapshot]:
    """`load_cluster` of several clusters in one snapshot; the gone ones left out."""
    out: dict[str, ClusterSnapshot] = {}
    with db.core_read(snapshot=True) as s:
        for uuid in uuids:
            snap = _load_cluster(s, uuid)
            if snap is not None:
                out[uuid] = snap
    return out


def _load_cluster(s: Connection, uuid: str) -> ClusterSnapshot | None:
    cl = s.execute(_CLUSTER, {"uuid": uuid}).one_or_none()
    if cl is None:
        return None
    groups = [
        GroupSummary(*g[:-1], convert.conditions_from_json(g[-1]))
        for g in s.execute(_CLUSTER_GROUPS, {"uuid": uuid})
    ]
    master_ids = [g.uuid for g in groups if g.role == m.ROLE_MASTER]
    up: tuple[str, ...] = ()
    ready = 0
    if master_ids:
        rows = s.execute(_READY_IN_GROUPS, {"groups": master_ids}).all()
        ready = int(rows[0].ready) if rows else 0
        up = tuple(r.address for r in rows if r.address is not None)
    total = sum(g.node_count for g in groups if g.role == m.ROLE_MASTER)
    return ClusterSnapshot(
        cluster=convert.cluster_from_row(cl),
        operation_started_at=cl.operation_started_at,
        groups=groups,
        masters_total=total,
        masters_ready=ready,
        master_addresses=up,
    )


_SIBLINGS = select(
    _NG.c.uuid,
    _NG.c.role,
    _NG.c.conditions,
    _NG.c.deleting,
    _NG.c.status,
    _NG.c.generation,
    _NG.c.observed_generation,
).where(_NG.c.cluster_uuid == bindparam("cluster"))


@dataclass(frozen=True)
class Sibling:
    """Another node group of a cluster, as a rollout needs to know it."""

    uuid: str
    role: str
    conditions: tuple[m.Condition, ...]
    deleting: bool
    status: str
    settled: bool  # its desired state was observed and its operation ended


def siblings(db: Database, cluster_uuid: str) -> list[Sibling]:
    """The node groups of a cluster, with their conditions (one read; only a group
    that has nodes to roll asks)."""
    with db.core_read() as s:
        return [
            Sibling(
                u,
                role,
                convert.conditions_from_json(c),
                bool(d),
                status,
                observed >= gen and status.endswith("_COMPLETE"),
            )
            for u, role, c, d, status, gen, observed in s.execute(
                _SIBLINGS, {"cluster": cluster_uuid}
            )
        ]


_PLACES = select(_NG.c.uuid, _NG.c.provider, _NG.c.cluster_uuid, _NG.c.project_id).where(
    _NG.c.uuid.in_(bindparam("uuids", expanding=True))
)


@dataclass(frozen=True)
class GroupPlace:
    """Where a node group's machines are, fixed when the group is made: its provider
    (None: the default one), cluster and project (whose identity lists them)."""

    provider: str | None
    cluster_uuid: str
    project_id: str


def places_of(db: Database, uuids: Collection[str]) -> dict[str, GroupPlace]:
    """Where each node group's machines are, in one indexed read: a pass lists a
    group's machines before it reads the group's snapshot."""
    with db.core_read() as s:
        rows = s.execute(_PLACES, {"uuids": list(uuids)})
        return {u: GroupPlace(p, c, pr) for u, p, c, pr in rows}


_UNASKED = select(_NG.c.uuid).where(
    _NG.c.uuid.in_(bindparam("uuids", expanding=True)),
    _NG.c.deleting.is_(True),
    _NG.c.observed_generation < _NG.c.generation,
)


def deletes_unasked(db: Database, uuids: Collection[str]) -> set[str]:
    """Which of node groups `uuids` are being deleted and no delete pass has seen it yet
    (a delete pass marks its generation observed: nodegroup/delete.py)."""
    with db.core_read() as s:
        return set(s.scalars(_UNASKED, {"uuids": list(uuids)}))


def taken_names(db: Database, cluster_uuid: str, names: Collection[str]) -> set[str]:
    """Which of `names` a node of the cluster already has (chunked IN queries on the
    name index: a pass that adds nodes checks only its new names, not the cluster's)."""
    found: set[str] = set()
    want = list(names)
    with db.core_read() as s:
        for i in range(0, len(want), CHUNK):
            chunk = {"names": want[i : i + CHUNK], "cluster": cluster_uuid}
            found.update(s.scalars(_TAKEN_NAMES, chunk))
    return found


def existing_groups(db: Database, uuids: Collection[str]) -> set[str]:
    """Which of `uuids` are node groups in the database (chunked IN queries)."""
    found: set[str] = set()
    ids = list(uuids)
    with db.core_read() as s:
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i : i + CHUNK]
            found.update(s.scalars(select(_NG.c.uuid).where(_NG.c.uuid.in_(chunk))))
    return found
