"""The outcome of the conductor's passes: node rows, status, conditions, events and
requeue times, each pass's writes in one transaction, fenced by its leases.

What a pass writes is a value (`writes.py`); only the reconcilers apply one (an
import-linter contract names them). Hot paths are bulk: one INSERT of many node
rows, one executemany UPDATE by primary key, one DELETE ... IN; never a
transaction per node.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Table, bindparam, case, delete, func, insert, select, update

from shoal.db import convert, leases, notify, orphans, queue
from shoal.db.engine import Database
from shoal.db.snapshots import CHUNK, ClusterSnapshot, GroupSnapshot
from shoal.db.tables import (
    ClusterCARow,
    ClusterCredentialRow,
    ClusterRow,
    EventRow,
    NodeGroupRow,
    NodeRow,
    NodeTaskRow,
    OperationRow,
    table_of,
)
from shoal.db.types import UTCDateTime, utcnow
from shoal.db.writes import ClusterWrite, EventIn, GroupWrite, StatusWrite
from shoal.domain import conditions as cond

_CL, _NG, _NODE, _EV = (table_of(r) for r in (ClusterRow, NodeGroupRow, NodeRow, EventRow))
_UPDATE_CLUSTER = update(_CL).where(_CL.c.uuid == bindparam("b_uuid"))
_UPDATE_REF = update(_NG).where(_NG.c.uuid == bindparam("b_uuid"))
_UPDATE_NODE = update(_NODE).where(_NODE.c.id == bindparam("b_id"))
_INSERT_NODES = insert(_NODE).returning(_NODE.c.uuid, _NODE.c.id)
_INSERT_EVENTS = insert(_EV)
_OP, _TASK = table_of(OperationRow), table_of(NodeTaskRow)


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
        keys = [leases.key(queue.NODEGROUP.name, sn.group.uuid) for sn, _ in writes]
        leases.fence_all(s, keys, holder)
        inserts = [row for _, w in writes for row in w.inserts]
        if inserts:
            ids.update((u, i) for u, i in s.execute(_INSERT_NODES, inserts))
        for batch in _by_columns([u for _, w in writes for u in w.updates]):
            s.execute(_UPDATE_NODE, batch)
        gone = [i for _, w in writes for i in w.delete_ids]
        for i in range(0, len(gone), CHUNK):
            s.execute(delete(NodeRow).where(NodeRow.id.in_(gone[i : i + CHUNK])))
        _apply_operations(s, [w for _, w in writes])
        events = [_event(sn.group.cluster_id, e, now) for sn, w in writes for e in w.events]
        if events:
            s.execute(_INSERT_EVENTS, events)
        statuses: dict[tuple[bool, bool], list[dict[str, Any]]] = {}
        for snap, w in writes:
            g = snap.group
            if w.delete_group:
                # Its machines still listed later are shoal's to sweep: a tombstone.
                orphans.bury(s, orphans.KIND_NODEGROUP, {g.uuid: g.cluster_id}, now)
                s.execute(delete(NodeRow).where(NodeRow.nodegroup_uuid == g.uuid))
                s.execute(delete(NodeGroupRow).where(NodeGroupRow.uuid == g.uuid))
                continue
            if w.provider_ref is not None:
                s.execute(_UPDATE_REF, {"b_uuid": g.uuid, "provider_ref": w.provider_ref})
            if w.status is not None:
                variant = (w.status.observed, w.status.memory is not None)
                statuses.setdefault(variant, []).append(_status_params(g.uuid, w.status, now))
        for (observed, memory), params in statuses.items():
            s.execute(_status_stmt(_NG, observed, memory), params)
        # The wall time of this write (not the pass start) so that a cluster pass
        # that started earlier sees the poke as newer than itself.
        for cluster in dict.fromkeys(
            sn.group.cluster_id for sn, w in writes if w.poke_cluster or w.delete_group
        ):
            s.execute(_UPDATE_CLUSTER, {"b_uuid": cluster, "next_reconcile_at": utcnow()})
    return ids


def _apply_operations(s: Connection, writes: list[GroupWrite]) -> None:
    """Operations started, node tasks started, tasks that ended (driver kinds),
    operations that ended."""
    started = [w.operation_insert for w in writes if w.operation_insert is not None]
    if started:
        s.execute(insert(_OP), started)
    inserts = [row for w in writes for row in w.task_inserts]
    if inserts:
        s.execute(insert(_TASK), inserts)
    for u in (u for w in writes for u in w.task_updates):
        changes = {k: v for k, v in u.items() if k != "uuid"}
        s.execute(update(_TASK).where(_TASK.c.uuid == u["uuid"]).values(changes))
    for w in writes:
        if w.operation is not None:
            changes = {k: v for k, v in w.operation.items() if k != "uuid"}
            s.execute(update(_OP).where(_OP.c.uuid == w.operation["uuid"]).values(changes))


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
def _status_stmt(table: Table, observed: bool, memory: bool = False) -> Any:
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
    if memory:
        values["memory"] = bindparam("memory", type_=c["memory"].type)
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
    if st.memory is not None:
        params["memory"] = st.memory
    return params


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
        keys = [leases.key(queue.CLUSTER.name, sn.cluster.uuid) for sn, _ in writes]
        leases.fence_all(s, keys, holder)
        for snap, w in writes:
            _apply_cluster(s, snap.cluster.uuid, w, now)


def _apply_cluster(s: Connection, uuid: str, w: ClusterWrite, now: datetime) -> None:
    if w.delete_cluster:
        groups = s.scalars(select(_NG.c.uuid).where(_NG.c.cluster_uuid == uuid)).all()
        orphans.bury(s, orphans.KIND_NODEGROUP, dict.fromkeys(groups, uuid), now)
        orphans.bury(s, orphans.KIND_CLUSTER, {uuid: uuid}, now)
        s.execute(delete(NodeRow).where(NodeRow.cluster_uuid == uuid))
        s.execute(delete(EventRow).where(EventRow.cluster_uuid == uuid))
        s.execute(delete(ClusterCARow).where(ClusterCARow.cluster_uuid == uuid))
        s.execute(delete(ClusterCredentialRow).where(ClusterCredentialRow.cluster_uuid == uuid))
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


def record_errors(
    db: Database,
    kind: queue.Kind,
    uuids: Collection[str],
    message: str,
    started: datetime,
    *,
    holder: str,
    delay: Callable[[float], float],
) -> None:
    """A pass over `uuids` failed unexpectedly: each gets a `ReconcileError` condition
    with `message` and waits `delay(seconds it has been failing)` before its next
    pass, unless desired state was written while the pass ran (then it stays due).
    Status and generation are left alone. Fenced by `holder`'s leases."""
    table = kind.table
    with db.core_write() as s:
        leases.fence_all(s, [leases.key(kind.name, u) for u in uuids], holder)
        rows = s.execute(
            select(table.c.uuid, table.c.conditions, table.c.next_reconcile_at).where(
                table.c.uuid.in_(list(uuids))
            )
        ).all()
        for uuid, raw, due in rows:
            conds = convert.conditions_from_json(raw)
            old = cond.get(conds, cond.RECONCILE_ERROR)
            since = old.last_transition if old is not None and old.status == cond.TRUE else None
            waited = (started - since).total_seconds() if since is not None else 0.0
            conds = cond.set_true(
                conds, cond.RECONCILE_ERROR, cond.UNEXPECTED_ERROR, message, started
            )
            poked = due is not None and due > started
            nxt = due if poked else started + timedelta(seconds=delay(waited))
            s.execute(
                update(table)
                .where(table.c.uuid == uuid)
                .values(conditions=convert.conditions_to_json(conds), next_reconcile_at=nxt)
            )
