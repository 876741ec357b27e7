"""The conductor's database work: claim due resources, load snapshots, and write
the outcome of a pass (node rows, status, conditions, events) in one place.

Hot paths are bulk: one INSERT of many node rows, one executemany UPDATE by
primary key, one DELETE ... IN; never a transaction per node.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Select,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from shoal.db import convert, leases, notify
from shoal.db.engine import Database
from shoal.db.tables import (
    ClusterCARow,
    ClusterRow,
    ConductorRow,
    EventRow,
    LeaseRow,
    NodeGroupRow,
    NodeRow,
    table_of,
)
from shoal.db.types import UTCDateTime, utcnow
from shoal.domain import model as m

CHUNK = 500
# Small node groups (at most BATCH_NODES nodes) of one cluster that are due together
# are claimed and passed together, at most BATCH_MAX of them (claim_due_groups).
BATCH_NODES = 32
BATCH_MAX = 16

# The tables as Core objects: the conductor's reads and writes select columns and
# write by key, without the ORM's identity map and unit of work.
_CL, _NG, _NODE, _EV = (table_of(r) for r in (ClusterRow, NodeGroupRow, NodeRow, EventRow))
# The statements every pass runs, built once with parameters (uuid, ...): building
# and hashing a statement costs more than SQLite running it on a few rows, and a
# small cluster pays it per pass. An UPDATE without .values() sets the columns the
# parameters name ("b_" parameters are the WHERE clause's).
# A node group with the facts of its cluster that its passes need (one statement).
_GROUP = (
    select(
        *_NG.c,
        _CL.c.name.label("cluster_name"),
        _CL.c.attrs.label("cluster_attrs"),
        _CL.c.deleting.label("cluster_deleting"),
    )
    .join(_CL, _CL.c.uuid == _NG.c.cluster_uuid)
    .where(_NG.c.uuid.in_(bindparam("uuids", expanding=True)))
)
_CLUSTER = select(*_CL.c).where(_CL.c.uuid == bindparam("uuid"))
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
_UPDATE_CLUSTER = update(_CL).where(_CL.c.uuid == bindparam("b_uuid"))
_UPDATE_NODE = update(_NODE).where(_NODE.c.id == bindparam("b_id"))
_TAKEN_NAMES = select(_NODE.c.name).where(
    _NODE.c.name.in_(bindparam("names", expanding=True)),
    _NODE.c.cluster_uuid == bindparam("cluster"),
)
_INSERT_NODES = insert(_NODE).returning(_NODE.c.uuid, _NODE.c.id)
_INSERT_EVENTS = insert(_EV)


@dataclass(frozen=True)
class EventIn:
    """An event to append with the pass's writes."""

    reason: str
    message: str
    type: str = "Normal"
    nodegroup_uuid: str | None = None
    node_uuid: str | None = None


@dataclass(frozen=True)
class GroupSnapshot:
    """Everything one node group pass needs, read in one consistent transaction."""

    group: m.NodeGroup
    cluster_name: str
    cluster_attrs: dict[str, Any]
    cluster_deleting: bool
    operation_started_at: datetime | None
    nodes: list[m.Node]


@dataclass(frozen=True)
class GroupSummary:
    uuid: str
    name: str
    role: str
    status: str
    status_reason: str | None
    node_count: int
    deleting: bool


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything one cluster pass needs."""

    cluster: m.Cluster
    operation_started_at: datetime | None
    groups: list[GroupSummary]
    masters_total: int
    masters_ready: int
    master_addresses: tuple[str, ...]  # of ready masters, oldest first


@dataclass
class StatusWrite:
    """The status part of a pass, applied only if the generation did not move."""

    generation: int
    status: str
    status_reason: str | None
    conditions: tuple[m.Condition, ...]
    observed: bool  # set observed_generation = generation
    next_reconcile_at: datetime | None


@dataclass
class GroupWrite:
    """Everything a node group pass writes, in one transaction."""

    inserts: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)  # each has "id"
    delete_ids: list[int] = field(default_factory=list)
    events: list[EventIn] = field(default_factory=list)
    status: StatusWrite | None = None
    delete_group: bool = False
    poke_cluster: bool = False

    def empty(self) -> bool:
        return not (self.inserts or self.updates or self.delete_ids or self.events) and (
            self.status is None and not self.delete_group and not self.poke_cluster
        )


def _due(row: Any, now: Any) -> Any:
    """Due: its requeue time has come. Every desired-state write sets it to now and
    every pass to when it wants to be looked at again (None at rest), so claims
    and next-due lookups are ordered scans of the `next_reconcile_at` index that
    stop at the first rows they need, whatever the backlog."""
    return row.next_reconcile_at <= now


def _free(now: Any) -> Any:
    """No lease on the joined resource, or an expired one."""
    return or_(LeaseRow.resource.is_(None), LeaseRow.expires_at <= now)


def _lease_join(kind: str, row: Any) -> Any:
    return LeaseRow.resource == literal(kind + ":").concat(row.uuid)


def _row(kind: str) -> Any:
    return NodeGroupRow if kind == leases.NODEGROUP else ClusterRow


@functools.cache
def _claim_query(kind: str, *, lock: bool = False) -> Select[Any]:
    """The due, unleased resources of `kind`, oldest due first (node groups with
    their cluster and desired size); `now` and `limit` are parameters. Built once
    per variant: claims run several times per pass, and building and hashing
    this statement cost more than SQLite running it."""
    row = _row(kind)
    now = bindparam("now", type_=UTCDateTime())
    cols = (row.uuid, row.cluster_uuid, row.node_count) if kind == leases.NODEGROUP else (row.uuid,)
    q = (
        select(*cols)
        .outerjoin(LeaseRow, _lease_join(kind, row))
        .where(_due(row, now), _free(now))
        .order_by(row.next_reconcile_at, row.id)
        .limit(bindparam("limit", type_=Integer()))
    )
    return q.with_for_update(skip_locked=True, of=row) if lock else q


@functools.cache
def _siblings_query(*, lock: bool = False) -> Select[str, str]:
    """The due, unleased small node groups of some clusters (`clusters`, `now`)."""
    now = bindparam("now", type_=UTCDateTime())
    q = (
        select(NodeGroupRow.uuid, NodeGroupRow.cluster_uuid)
        .outerjoin(LeaseRow, _lease_join(leases.NODEGROUP, NodeGroupRow))
        .where(
            _due(NodeGroupRow, now),
            _free(now),
            NodeGroupRow.cluster_uuid.in_(bindparam("clusters", expanding=True)),
            NodeGroupRow.node_count <= BATCH_NODES,
        )
        .order_by(NodeGroupRow.next_reconcile_at, NodeGroupRow.id)
    )
    return q.with_for_update(skip_locked=True, of=NodeGroupRow) if lock else q


@functools.cache
def _next_query(kind: str) -> Select[datetime]:
    """The earliest requeue time of an unleased resource of `kind` (`now` a parameter)."""
    row = _row(kind)
    now = bindparam("now", type_=UTCDateTime())
    return (
        select(row.next_reconcile_at)
        .outerjoin(LeaseRow, _lease_join(kind, row))
        .where(row.next_reconcile_at.is_not(None), _free(now))
        .order_by(row.next_reconcile_at)
        .limit(1)
    )


_NEXT_EXPIRY = (
    select(LeaseRow.expires_at)
    .where(LeaseRow.expires_at > bindparam("now", type_=UTCDateTime()))
    .order_by(LeaseRow.expires_at)
    .limit(1)
)


def requeue_unobserved(db: Database, now: datetime) -> int:
    """The safety net: a resource whose generation moved but that has no requeue
    time (a desired-state write that did not set one) is made due now. Run by
    the conductor's heartbeat, not by every claim; a read finds most times that
    there is nothing to do. Returns how many it requeued."""
    with db.core_read() as s:
        if not any(s.scalar(q) for q in _UNOBSERVED):
            return 0
    found = 0
    with db.core_write() as s:
        for row, table in ((NodeGroupRow, _NG), (ClusterRow, _CL)):
            found += s.execute(
                update(table).where(_unobserved(row)).values(next_reconcile_at=now)
            ).rowcount
    return found


def _unobserved(row: Any) -> Any:
    return and_(row.observed_generation < row.generation, row.next_reconcile_at.is_(None))


_UNOBSERVED = tuple(
    select(row.id).where(_unobserved(row)).limit(1) for row in (NodeGroupRow, ClusterRow)
)


def _nothing_due(db: Database, kind: str, now: datetime) -> bool:
    """Whether no resource of `kind` is due and free: most looks find nothing, and a
    read answers that without opening a write transaction."""
    with db.core_read() as s:
        return s.scalar(_claim_query(kind), {"now": now, "limit": 1}) is None


def claim_due(
    db: Database,
    kind: str,
    holder: str,
    now: datetime,
    ttl: float,
    limit: int,
    *,
    release: Collection[str] = (),
) -> list[str]:
    """Lease up to `limit` due resources of `kind` ("nodegroup" or "cluster"), after
    releasing `holder`'s leases `release` in the same transaction.

    On PostgreSQL the candidates are locked FOR UPDATE SKIP LOCKED, so
    conductors claiming at the same moment take different resources.
    """
    if not release and _nothing_due(db, kind, now):
        return []
    q = _claim_query(kind, lock=not db.is_sqlite)
    with db.core_write() as s:
        leases.release(s, holder, release)
        uuids = list(s.scalars(q, {"now": now, "limit": limit}))
        return [u for u in uuids if leases.claim(s, leases.key(kind, u), holder, now, ttl)]


def claim_due_groups(
    db: Database,
    holder: str,
    now: datetime,
    ttl: float,
    limit: int,
    *,
    release: Collection[str] = (),
    merge: bool = False,
) -> list[list[str]]:
    """Like `claim_due` for node groups, but a small group (at most BATCH_NODES nodes)
    comes with the other due, unleased small groups of its cluster (a batch, up
    to BATCH_MAX): one pass then reconciles them together, sharing its reads and
    writes, as when a small cluster is created and all its groups are due at
    once. Each group keeps its own lease, status and requeue time. A big group
    is a batch of its own: its creates keep a worker of their own, and its
    intent rows do not wait for other groups'. `merge`: the small groups of all
    the claimed groups' clusters make one batch (up to BATCH_MAX), for a
    conductor whose workers are all busy with a backlog of small clusters."""
    if not release and _nothing_due(db, leases.NODEGROUP, now):
        return []
    lock = not db.is_sqlite
    with db.core_write() as s:
        leases.release(s, holder, release)
        first = s.execute(
            _claim_query(leases.NODEGROUP, lock=lock), {"now": now, "limit": limit}
        ).all()
        if not first:
            return []

        def key(uuid: str, cluster: str, size: int) -> str:  # the batch a group goes in
            return uuid if size > BATCH_NODES else "" if merge else cluster

        small = list(dict.fromkeys(r.cluster_uuid for r in first if r.node_count <= BATCH_NODES))
        # The batches, in claim order. Merging, a big group is taken only when no
        # small one is due: not claimed ahead of time to wait behind this pass.
        batches: dict[str, list[str]] = {
            key(*r): []
            for r in first
            if r.node_count <= BATCH_NODES or not merge or r is first[0] and not small
        }
        more = (
            s.execute(_siblings_query(lock=lock), {"now": now, "clusters": small}).all()
            if small
            else []
        )
        for uuid, cluster, size in [*first, *((r.uuid, r.cluster_uuid, 0) for r in more)]:
            batch = batches.get(key(uuid, cluster, size))
            if batch is None or uuid in batch or len(batch) >= BATCH_MAX:
                continue
            if leases.claim(s, leases.key(leases.NODEGROUP, uuid), holder, now, ttl):
                batch.append(uuid)
        return [b for b in batches.values() if b]


@dataclass(frozen=True)
class Load:
    """What a conductor needs to take only its fair share of due work."""

    due: int  # resources of the kind due now, leased or not
    live_conductors: int  # conductors that reported since `alive_since`
    oldest_unclaimed: datetime | None  # earliest due time of an unleased due resource


def load(db: Database, kind: str, now: datetime, alive_since: datetime) -> Load:
    """Due work of `kind` and live conductors, for the per-conductor fair share."""
    row = _row(kind)
    with db.core_read() as s:
        due = s.scalar(select(func.count()).select_from(row).where(_due(row, now)))
        oldest = s.scalar(
            _claim_query(kind).with_only_columns(row.next_reconcile_at), {"now": now, "limit": 1}
        )
        live = s.scalar(
            select(func.count())
            .select_from(ConductorRow)
            .where(ConductorRow.last_seen_up >= alive_since, ConductorRow.disabled.is_(False))
        )
    return Load(int(due or 0), int(live or 0), oldest)


def live_conductors(db: Database, alive_since: datetime) -> int:
    """Conductors that reported since `alive_since` and are not disabled."""
    with db.core_read() as s:
        n = s.scalar(
            select(func.count())
            .select_from(ConductorRow)
            .where(ConductorRow.last_seen_up >= alive_since, ConductorRow.disabled.is_(False))
        )
    return int(n or 0)


def next_due_at(db: Database, now: datetime | None = None) -> datetime | None:
    """When a conductor may next find something to claim: the earliest requeue time
    of a resource nobody holds, or the earliest expiry of a lease someone holds
    (a crashed holder's work becomes claimable then). Three ordered index scans
    of one row each."""
    params = {"now": now or utcnow()}
    with db.core_read() as s:
        found = [
            s.scalar(_next_query(leases.NODEGROUP), params),
            s.scalar(_next_query(leases.CLUSTER), params),
            s.scalar(_NEXT_EXPIRY, params),
        ]
    return min((t for t in found if t is not None), default=None)


def load_group(db: Database, uuid: str) -> GroupSnapshot | None:
    """The node group, its cluster's facts and its nodes; None when it is gone."""
    return load_groups(db, [uuid]).get(uuid)


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
        return {
            ng.uuid: GroupSnapshot(
                group=convert.nodegroup_from_row(ng),
                cluster_name=ng.cluster_name,
                cluster_attrs=dict(ng.cluster_attrs or {}),
                cluster_deleting=ng.cluster_deleting,
                operation_started_at=ng.operation_started_at,
                nodes=nodes[ng.uuid],
            )
            for ng in groups
        }


def apply_group(
    db: Database, snap: GroupSnapshot, w: GroupWrite, now: datetime, *, holder: str
) -> dict[str, int]:
    """Write a node group pass: node rows, events, status (generation-guarded), pokes,
    fenced by `holder`'s lease (LeaseLost when another conductor took the group over).
    Returns the ids of the node rows it inserted, by uuid."""
    return apply_groups(db, [(snap, w)], now, holder=holder)


def apply_groups(
    db: Database, writes: list[tuple[GroupSnapshot, GroupWrite]], now: datetime, *, holder: str
) -> dict[str, int]:
    """`apply_group` of several groups (one pass over them) in one transaction, each
    kind of statement once for all of them."""
    ids: dict[str, int] = {}
    if not writes:
        return ids
    with db.core_write() as s:
        # In one global order (cluster, then group), so that two conductors' batches
        # of the same clusters never wait for each other in a cycle.
        for snap, _ in sorted(writes, key=lambda x: (x[0].group.cluster_id, x[0].group.uuid)):
            _lock_in_order(s, snap.group.cluster_id, snap.group.uuid)
        keys = [leases.key(leases.NODEGROUP, sn.group.uuid) for sn, _ in writes]
        leases.fence_all(s, keys, holder)
        inserts = [row for _, w in writes for row in w.inserts]
        if inserts:
            ids.update((u, i) for u, i in s.execute(_INSERT_NODES, inserts))
        for batch in _by_columns([u for _, w in writes for u in w.updates]):
            s.execute(_UPDATE_NODE, batch)
        gone = [i for _, w in writes for i in w.delete_ids]
        for i in range(0, len(gone), CHUNK):
            s.execute(delete(NodeRow).where(NodeRow.id.in_(gone[i : i + CHUNK])))
        events = [_event(sn.group.cluster_id, e, now) for sn, w in writes for e in w.events]
        if events:
            s.execute(_INSERT_EVENTS, events)
        statuses: dict[bool, list[dict[str, Any]]] = {}
        for snap, w in writes:
            g = snap.group
            if w.delete_group:
                s.execute(delete(NodeRow).where(NodeRow.nodegroup_uuid == g.uuid))
                s.execute(delete(NodeGroupRow).where(NodeGroupRow.uuid == g.uuid))
            elif w.status is not None:
                statuses.setdefault(w.status.observed, []).append(
                    _status_params(g.uuid, w.status, now)
                )
        for observed, params in statuses.items():
            s.execute(_status_stmt(_NG, observed), params)
        # The wall time of this write (not the pass start) so that a cluster pass
        # that started earlier sees the poke as newer than itself.
        for cluster in dict.fromkeys(
            sn.group.cluster_id for sn, w in writes if w.poke_cluster or w.delete_group
        ):
            s.execute(_UPDATE_CLUSTER, {"b_uuid": cluster, "next_reconcile_at": utcnow()})
    return ids


def _by_columns(updates: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Node updates (each with its "id") as executemany batches that set the same
    columns: one UPDATE ... WHERE id = ? statement per batch."""
    batches: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for u in updates:
        values = {k: v for k, v in u.items() if k != "id"}
        batches.setdefault(tuple(sorted(values)), []).append({"b_id": u["id"], **values})
    return list(batches.values())


def _lock_in_order(s: Connection, cluster_uuid: str, group_uuid: str | None = None) -> None:
    """Row-lock the cluster, then the node group, before touching nodes: the order the
    services lock in (cluster -> group -> nodes), so an API write racing a pass
    waits for it instead of deadlocking with it. SQLite has one writer anyway."""
    if s.dialect.name == "sqlite":
        return
    s.execute(select(ClusterRow.id).where(ClusterRow.uuid == cluster_uuid).with_for_update())
    if group_uuid is not None:
        s.execute(select(NodeGroupRow.id).where(NodeGroupRow.uuid == group_uuid).with_for_update())


def _event(cluster_uuid: str, e: EventIn, now: datetime) -> dict[str, Any]:
    return {
        "cluster_uuid": cluster_uuid,
        "nodegroup_uuid": e.nodegroup_uuid,
        "node_uuid": e.node_uuid,
        "time": now,
        "type": e.type,
        "reason": e.reason,
        "message": e.message,
    }


_STATUS_COLUMNS = ("status", "status_reason", "conditions", "updated_at")


@functools.cache
def _status_stmt(table: Table, observed: bool) -> Any:
    """The one UPDATE that ends a pass (built once per table and variant): the status
    columns only if the generation is still the one the pass saw (parameters named
    after them), and the requeue time unless someone asked for an earlier pass
    while this one ran. SET expressions read the row as it was before the UPDATE."""
    c = table.c
    same = c.generation == bindparam("b_generation")
    cols = _STATUS_COLUMNS + (("observed_generation",) if observed else ())
    values: dict[str, Any] = {
        name: case((same, bindparam(name, type_=c[name].type)), else_=c[name]) for name in cols
    }
    started = bindparam("b_started", type_=UTCDateTime())
    poked = c.next_reconcile_at > started
    # Desired state written while this pass ran (its generation moved): due, even
    # if that write's clock was behind this pass's start.
    values["next_reconcile_at"] = case(
        (poked, c.next_reconcile_at),
        (~same, func.coalesce(c.next_reconcile_at, started)),
        else_=bindparam("b_next", type_=UTCDateTime()),
    )
    return update(table).where(c.uuid == bindparam("b_uuid")).values(values)


def _write_status(
    s: Connection, table: Table, uuid: str, st: StatusWrite, started: datetime
) -> None:
    """Status fields only if the generation is still the one this pass saw; the
    requeue time unless someone asked for an earlier pass while this one ran."""
    s.execute(_status_stmt(table, st.observed), _status_params(uuid, st, started))


def _status_params(uuid: str, st: StatusWrite, started: datetime) -> dict[str, Any]:
    params: dict[str, Any] = {
        "b_uuid": uuid,
        "b_generation": st.generation,
        "b_started": started,
        "b_next": st.next_reconcile_at,
        "status": st.status,
        "status_reason": st.status_reason,
        "conditions": convert.conditions_to_json(st.conditions),
        "updated_at": started,
    }
    if st.observed:
        params["observed_generation"] = st.generation
    return params


def load_cluster(db: Database, uuid: str) -> ClusterSnapshot | None:
    """The cluster, a summary of its node groups and of its masters."""
    return load_clusters(db, [uuid]).get(uuid)


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
    groups = [GroupSummary(*g) for g in s.execute(_CLUSTER_GROUPS, {"uuid": uuid})]
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


@dataclass
class ClusterWrite:
    """Everything a cluster pass writes."""

    events: list[EventIn] = field(default_factory=list)
    status: StatusWrite | None = None
    api_address: str | None = None
    health: tuple[str, dict[str, str]] | None = None  # (health_status, reason) when changed
    mark_groups_deleting: list[str] = field(default_factory=list)
    delete_cluster: bool = False


def apply_clusters(
    db: Database, writes: list[tuple[ClusterSnapshot, ClusterWrite]], now: datetime, *, holder: str
) -> None:
    """Write the passes of some clusters in one transaction, fenced by `holder`'s
    leases (LeaseLost when another conductor took one over)."""
    if not writes:
        return
    writes = sorted(writes, key=lambda x: x[0].cluster.uuid)  # one lock order for all
    with db.core_write() as s:
        for snap, _ in writes:
            _lock_in_order(s, snap.cluster.uuid)
        keys = [leases.key(leases.CLUSTER, sn.cluster.uuid) for sn, _ in writes]
        leases.fence_all(s, keys, holder)
        for snap, w in writes:
            _apply_cluster(s, snap.cluster.uuid, w, now)


def _apply_cluster(s: Connection, uuid: str, w: ClusterWrite, now: datetime) -> None:
    if w.delete_cluster:
        s.execute(delete(NodeRow).where(NodeRow.cluster_uuid == uuid))
        s.execute(delete(EventRow).where(EventRow.cluster_uuid == uuid))
        s.execute(delete(ClusterCARow).where(ClusterCARow.cluster_uuid == uuid))
        s.execute(delete(NodeGroupRow).where(NodeGroupRow.cluster_uuid == uuid))
        s.execute(delete(ClusterRow).where(ClusterRow.uuid == uuid, ClusterRow.deleting))
        return
    if w.events:
        s.execute(_INSERT_EVENTS, [_event(uuid, e, now) for e in w.events])
    facts: dict[str, Any] = {}
    if w.api_address is not None:
        facts["api_address"] = w.api_address
    if w.health is not None:
        facts.update(health_status=w.health[0], health_status_reason=w.health[1])
    if facts:
        s.execute(_UPDATE_CLUSTER, {"b_uuid": uuid, **facts})
    if w.mark_groups_deleting:
        notify.send(s)  # other conductors may take these groups in parallel
        s.execute(
            update(NodeGroupRow)
            .where(NodeGroupRow.uuid.in_(w.mark_groups_deleting))
            .values(
                deleting=True,
                status="DELETE_IN_PROGRESS",
                generation=NodeGroupRow.generation + 1,
                next_reconcile_at=now,
            )
        )
    if w.status is not None:
        _write_status(s, _CL, uuid, w.status, now)


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


def existing_node_uuids(db: Database, uuids: Collection[str]) -> set[str]:
    """Which of `uuids` have a node row (chunked IN queries)."""
    found: set[str] = set()
    ids = list(uuids)
    with db.core_read() as s:
        for i in range(0, len(ids), CHUNK):
            found.update(
                s.scalars(select(NodeRow.uuid).where(NodeRow.uuid.in_(ids[i : i + CHUNK])))
            )
    return found
