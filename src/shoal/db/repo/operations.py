"""Operations and node tasks: what the services write and read (the conductor's
reads and writes go through snapshots and outcomes)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from shoal.agent import protocol
from shoal.db import convert, notify
from shoal.db.repo.templates import new_uuid
from shoal.db.tables import NodeGroupRow, NodeRow, NodeTaskRow, OperationRow
from shoal.domain import model as m
from shoal.domain import node_programs
from shoal.domain import operations as ops
from shoal.domain.errors import Conflict, NotFound


def running(session: Session, group_uuid: str) -> m.Operation | None:
    """The operation under way on a node group, if any."""
    row = session.scalars(
        select(OperationRow).where(
            OperationRow.nodegroup_uuid == group_uuid, OperationRow.state == ops.RUNNING
        )
    ).first()
    return convert.operation_from_row(row) if row is not None else None


def insert(
    session: Session,
    *,
    cluster_uuid: str,
    group_uuid: str,
    project_id: str,
    kind: str,
    params: dict[str, Any],
    nodes: list[str],
    batch_size: int,
    now: datetime,
) -> m.Operation:
    """A new operation (RUNNING); Conflict while another runs on the group."""
    if running(session, group_uuid) is not None:
        raise Conflict("an operation is already under way on this node group; wait for it")
    row = OperationRow(
        uuid=new_uuid(),
        cluster_uuid=cluster_uuid,
        nodegroup_uuid=group_uuid,
        project_id=project_id,
        kind=kind,
        params=params,
        nodes=nodes,
        batch_size=batch_size,
        state=ops.RUNNING,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return convert.operation_from_row(row)


def of_cluster(session: Session, cluster_uuid: str) -> list[m.Operation]:
    rows = session.scalars(
        select(OperationRow)
        .where(OperationRow.cluster_uuid == cluster_uuid)
        .order_by(OperationRow.id)
    )
    return [convert.operation_from_row(r) for r in rows]


def get(session: Session, cluster_uuid: str, uuid: str) -> m.Operation:
    row = session.scalars(
        select(OperationRow).where(
            OperationRow.cluster_uuid == cluster_uuid, OperationRow.uuid == uuid
        )
    ).first()
    if row is None:
        raise NotFound("Operation", uuid)
    return convert.operation_from_row(row)


def tasks(session: Session, operation_uuids: list[str]) -> list[m.NodeTask]:
    rows = session.scalars(
        select(NodeTaskRow)
        .where(NodeTaskRow.operation_uuid.in_(operation_uuids))
        .order_by(NodeTaskRow.id)
    )
    return [convert.task_from_row(r) for r in rows]


# -- the agent's side -------------------------------------------------------------


def heartbeat(
    session: Session, node_uuid: str, now: datetime, missing: str | None = None
) -> m.Node | None:
    """Record node `node_uuid`'s heartbeat, and what its image lacks (`missing`, a
    reason from `node_programs`: set, or cleared once no longer reported); the node
    (None when it is not known)."""
    row = session.scalars(select(NodeRow).where(NodeRow.uuid == node_uuid)).first()
    if row is None:
        return None
    row.agent_seen_at = now
    before = row.reason
    if missing is not None:
        row.reason = missing
    elif node_programs.is_missing_reason(row.reason):
        row.reason = None
    if row.reason != before:  # the group's status says it: look at the group now
        session.execute(
            update(NodeGroupRow)
            .where(NodeGroupRow.uuid == row.nodegroup_uuid)
            .values(next_reconcile_at=now)
        )
    return convert.node_from_row(row)


def task_for(session: Session, node_uuid: str) -> m.NodeTask | None:
    """The task this node's agent should run now: the one under way, else the oldest
    waiting one of an operation still running."""
    rows = session.execute(
        select(NodeTaskRow)
        .join(OperationRow, OperationRow.uuid == NodeTaskRow.operation_uuid)
        .where(
            NodeTaskRow.node_uuid == node_uuid,
            NodeTaskRow.kind.in_(ops.AGENT_KINDS),  # reboots and rebuilds are the driver's
            NodeTaskRow.state.in_((ops.PENDING, ops.RUNNING)),
            OperationRow.state == ops.RUNNING,
        )
        .order_by(NodeTaskRow.state.desc(), NodeTaskRow.id)  # RUNNING before PENDING
    ).scalars()
    row = next(iter(rows), None)
    return convert.task_from_row(row) if row is not None else None


def task_node(session: Session, task_uuid: str) -> str | None:
    """The node a task belongs to (None: no such task)."""
    return session.scalar(select(NodeTaskRow.node_uuid).where(NodeTaskRow.uuid == task_uuid))


def report(
    session: Session,
    node_uuid: str,
    task_uuid: str,
    state: str,
    output: str | None,
    exit_code: int | None,
    now: datetime,
) -> m.NodeTask:
    """A task's progress or end, from its node's agent; an ended task is left as it
    is (a report sent twice). NotFound when the task is not this node's. The node
    group is made due, so that the conductor goes on at once. A driver's task (a
    reboot) is the conductor's to report: NotFound for an agent."""
    row = session.scalars(
        select(NodeTaskRow).where(
            NodeTaskRow.uuid == task_uuid,
            NodeTaskRow.node_uuid == node_uuid,
            NodeTaskRow.kind.in_(ops.AGENT_KINDS),
        )
    ).first()
    if row is None:
        raise NotFound("Task", task_uuid)
    if row.state in protocol.ENDED:
        return convert.task_from_row(row)
    row.state = state
    row.output = output
    row.exit_code = exit_code
    if state == ops.RUNNING:
        row.started_at = row.started_at or now
    else:
        row.finished_at = now
        session.execute(
            update(NodeGroupRow)
            .where(NodeGroupRow.uuid == row.nodegroup_uuid)
            .values(next_reconcile_at=now)
        )
        notify.request(session)  # wake the conductor when this commits
    return convert.task_from_row(row)
