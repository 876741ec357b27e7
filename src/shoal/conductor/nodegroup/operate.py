"""Operate: drive the operation under way on the group (`domain/operations.py`),
node by node or in batches.

Agent kinds: a task is written for each node whose turn has come; the node's
agent takes it with its heartbeat and reports (the API records it and makes the
group due). Driver kinds: the conductor calls the driver (reboot, rebuild; the
task is written first, intent before action) and watches the machine come back;
`replace` retires the node, and scaling makes its successor. The operation
stops at the first failed task; the nodes after it are left as they were.
"""

from __future__ import annotations

import uuid as uuidlib
from datetime import timedelta
from typing import Any

from shoal.agent import protocol
from shoal.conductor import pacing
from shoal.conductor.nodegroup import spec
from shoal.conductor.nodegroup.state import DriverOp as DriverOp  # act and observe name it here
from shoal.conductor.nodegroup.state import Pass
from shoal.domain import health, revision
from shoal.domain import operations as ops
from shoal.domain.model import NodeState, NodeTask
from shoal.drivers.contract import MachineState


def operate(p: Pass) -> None:
    """One step of the group's operation, if it has one."""
    op = p.snap.operation
    if op is None:
        return
    for t in p.snap.tasks:
        if t.kind == protocol.REBASE and t.state == ops.SUCCEEDED:
            node = p.nodes.get(t.node_id)
            target = revision.of_group(p.snap.group.spec, p.snap.cluster_attrs)
            if node is not None and node.revision != target:
                _moved(p, t)  # its agent reported the rebase done
    states = {t.node_id: t.state for t in p.snap.tasks}
    for t in p.snap.tasks:
        if t.state in (ops.PENDING, ops.RUNNING):
            ended = _ended(p, t)
            if ended is not None:
                states[t.node_id] = ended
    result = ops.outcome(op.nodes, states)
    if result == ops.RUNNING:
        for uid in ops.next_nodes(op.nodes, states, op.batch_size):
            states[uid] = _start(p, uid)
        result = ops.outcome(op.nodes, states)
    done = sum(1 for n in op.nodes if states.get(n) in (ops.SUCCEEDED, protocol.CANCELLED))
    p.operation_note = f"operation {op.kind}: {done} of {len(op.nodes)} node(s) done"
    if result != ops.RUNNING:
        _finish(p, result, states)


def begin(p: Pass, kind: str, params: dict[str, Any], nodes: list[str], batch: int) -> None:
    """Start an operation of the conductor's own (a rollout that keeps the machines)."""
    g = p.snap.group
    p.w.operation_insert = {
        "uuid": str(uuidlib.uuid4()), "cluster_uuid": g.cluster_id, "nodegroup_uuid": g.uuid,
        "project_id": g.project_id, "kind": kind, "params": params, "nodes": nodes,
        "batch_size": batch, "state": ops.RUNNING, "created_at": p.now,
    }  # fmt: skip


def _moved(p: Pass, t: NodeTask) -> None:
    """A rebuild or rebase succeeded: the node is on the group's revision now."""
    node = p.nodes.get(t.node_id)
    if node is None:
        return
    target = revision.of_group(p.snap.group.spec, p.snap.cluster_attrs)
    image = t.params.get("image_id") or spec.probe(p).image_id
    p.set(node, revision=target, image_id=image)


def _ended(p: Pass, t: NodeTask) -> str | None:
    """The new state of a task still under way, if it ended (its update queued)."""
    node = p.nodes.get(t.node_id)
    if t.kind == ops.REPLACE:
        if node is not None:
            return None  # the old one goes; scaling makes its successor
        live = [n for n in p.nodes.values() if n.state is not NodeState.DELETING]
        settled = len(live) >= p.snap.group.spec.node_count and all(
            n.state is NodeState.ACTIVE for n in live
        )
        if settled:  # the successor is ready: the next node's turn (one down at a time)
            return _update(p, t, ops.SUCCEEDED, "replaced: the old node is gone, its successor up")
        return None
    if node is None or node.state is NodeState.DELETING:
        return _update(p, t, protocol.CANCELLED, "the node was removed before it ended")
    if ops.by_agent(t.kind):
        deadline = timedelta(seconds=p.snap.group.spec.health.startup_timeout_s)
        late = t.state == ops.PENDING and t.created_at and p.now - t.created_at > deadline
        if t.state == ops.PENDING and t.created_at and not late:
            p.look_again(t.created_at + deadline)
        if late:
            why = (
                f"the node's agent did not take the task within {deadline.total_seconds():g} s "
                "(is shoal-agent running on it?)"
            )
            return _update(p, t, ops.FAILED, why)
        return None  # the agent reports it
    m = p.machines.get(t.node_id)
    if m is None or m.state is MachineState.ERROR:
        fault = (m.fault if m else None) or "the machine is gone"
        return _update(p, t, ops.FAILED, f"{t.kind} failed: {fault}")
    if m.state is MachineState.BUILDING:
        if not t.output:
            _update(p, t, ops.RUNNING, f"{t.kind} under way")  # seen going down
        return None
    quiet_s = pacing.QUIET_DONE_S if p.restart_seconds is None else p.restart_seconds
    quiet = t.started_at is not None and p.now - t.started_at > timedelta(seconds=quiet_s)
    if m.state is MachineState.ACTIVE and (t.output or quiet):
        if t.kind == ops.REBUILD:
            _moved(p, t)
        return _update(p, t, ops.SUCCEEDED, f"{t.kind} done: the machine is ready again")
    return None


def _start(p: Pass, node_uuid: str) -> str:
    """Start a node's task; its state."""
    op = p.snap.operation
    assert op is not None
    node = p.nodes.get(node_uuid)
    if node is None or node.state is not NodeState.ACTIVE:
        state = protocol.CANCELLED
        _insert(p, node_uuid, state, "the node is not there or not ready: left out")
        return state
    if ops.by_agent(op.kind):
        _insert(p, node_uuid, ops.PENDING, None)
        p.event("OperationStep", f"{op.kind}: node {node.name}'s turn", node=node_uuid)
        return ops.PENDING
    task = _insert(p, node_uuid, ops.RUNNING, None)
    p.event("OperationStep", f"{op.kind}: node {node.name}", node=node_uuid)
    if op.kind == ops.REPLACE:
        p.retire(node)
    else:
        p.driver_ops.append(DriverOp(op.kind, node_uuid, dict(op.params), task))
    return ops.RUNNING


def _insert(p: Pass, node_uuid: str, state: str, output: str | None) -> str:
    op = p.snap.operation
    assert op is not None
    g = p.snap.group
    task = str(uuidlib.uuid4())
    p.w.task_inserts.append(
        {
            "uuid": task,
            "operation_uuid": op.uuid,
            "cluster_uuid": g.cluster_id,
            "nodegroup_uuid": g.uuid,
            "node_uuid": node_uuid,
            "kind": op.kind,
            "params": dict(op.params),
            "state": state,
            "output": output,
            "created_at": p.now,
            "started_at": p.now if state == ops.RUNNING else None,
            "finished_at": p.now if state == protocol.CANCELLED else None,
        }  # fmt: skip
    )
    return task


def _update(p: Pass, t: NodeTask, state: str, output: str) -> str:
    changes: dict[str, Any] = {"uuid": t.uuid, "state": state, "output": output}
    if state not in (ops.PENDING, ops.RUNNING):
        changes["finished_at"] = p.now
    p.w.task_updates.append(changes)
    return state


def call_failed(p: Pass, call: DriverOp, why: str) -> None:
    """A driver call failed (act): its task failed; a repair's call is said in an event
    (the next rung comes after the health policy's unhealthy timeout)."""
    if not call.task_uuid:
        p.event("RepairRefused", f"{why}", warning=True, node=call.node_uuid)
        return
    p.w.task_updates.append(
        {"uuid": call.task_uuid, "state": ops.FAILED, "output": why, "finished_at": p.now}
    )


def _finish(p: Pass, result: str, states: dict[str, str]) -> None:
    op = p.snap.operation
    assert op is not None
    g = p.snap.group
    if result == ops.SUCCEEDED:
        message = f"{op.kind} done on {len(op.nodes)} node(s)"
        p.event("OperationSucceeded", f"node group {g.name}: {message}")
    else:
        bad = next(n for n in op.nodes if states.get(n) == ops.FAILED)
        name = p.nodes[bad].name if bad in p.nodes else bad
        message = f"{op.kind} failed on node {name}; the nodes after it were left as they were"
        p.event("OperationFailed", f"node group {g.name}: {message}", warning=True, node=bad)
        if op.kind in (ops.REBUILD, protocol.REBASE):  # a rollout keeping the machines
            why = f"rollout stopped: {message}. Abort it, or fix the cause and upgrade again"
            p.memory = health.stall(p.memory, why, g.generation)
    p.w.operation = {
        "uuid": op.uuid,
        "state": result,
        "message": message,
        "finished_at": p.now,
        "updated_at": p.now,
    }
    p.operation_note = message
