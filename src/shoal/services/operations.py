"""Operations on nodes (shoal's actions): start one on a node group (or on every
group of a cluster), read them with their tasks, and the node agent's side
(heartbeats, task reports), authenticated by each node's own token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.db import events
from shoal.db.engine import Database
from shoal.db.repo import clusters, nodegroups, nodes
from shoal.db.repo import operations as repo
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain import node_programs, policy, sealing
from shoal.domain import operations as ops
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid, NotAuthenticated
from shoal.services import resize
from shoal.services.context import Caller

CREATE_KEYS = frozenset({"kind", "nodegroup", "nodes", "batch_size", "params"})


@dataclass(frozen=True)
class OperationView:
    operation: m.Operation
    tasks: tuple[m.NodeTask, ...]


def start(db: Database, caller: Caller, cluster_ident: str, body: dict[str, Any]) -> list[str]:
    """Start an operation on the named nodes of a group, on a whole group, or on every
    group of the cluster (one operation each, each under its group's lease); the
    operations' uuids."""
    policy.enforce(caller, "operation:create")
    v.reject_unknown("operation", body, CREATE_KEYS)
    kind, params = ops.check(body.get("kind"), body.get("params"))
    batch = v.integer("batch_size", body.get("batch_size", 1), lo=1, hi=1000)
    named = body.get("nodes")
    if named is not None and body.get("nodegroup") is None:
        raise Invalid("nodes names nodes of one node group: give nodegroup too", "nodes")
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, cluster_ident)
        ident = v.string("nodegroup", body.get("nodegroup"))
        groups = nodegroups.targets(s, cluster.uuid, ident)
        now = utcnow()
        started = []
        for group in groups:
            if group.deleting:
                raise Conflict(f"NodeGroup {group.name} is being deleted")
            members = [n for n in nodes.of_group(s, group.uuid) if n.state is m.NodeState.ACTIVE]
            if named is not None:
                most = caller.limits.nodes_per_group
                entries = [str(x) for x in v.str_list("nodes", named, most)]
                members = resize.match_nodes(nodes.of_group(s, group.uuid), entries, "nodes")
            if not members:
                raise Invalid(f"node group {group.name} has no ready node to operate on", "nodes")
            op = repo.insert(
                s,
                cluster_uuid=cluster.uuid,
                group_uuid=group.uuid,
                project_id=cluster.project_id,
                kind=kind,
                params=params,
                nodes=[n.uuid for n in members],
                batch_size=batch,
                now=now,
            )
            nodegroups.touch(s, group.uuid, "UPDATE_IN_PROGRESS", now)
            events.record(
                s,
                cluster.uuid,
                "OperationRequested",
                f"{kind} on {len(members)} node(s) of node group {group.name}, {batch} at a time",
                nodegroup_uuid=group.uuid,
            )
            started.append(op.uuid)
        clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
        return started


def list_for(db: Database, caller: Caller, cluster_ident: str) -> list[OperationView]:
    policy.enforce(caller, "operation:get")
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        found = repo.of_cluster(s, cluster.uuid)
        tasks = repo.tasks(s, [o.uuid for o in found])
    return [OperationView(o, tuple(t for t in tasks if t.operation_id == o.uuid)) for o in found]


def get(db: Database, caller: Caller, cluster_ident: str, uuid: str) -> OperationView:
    policy.enforce(caller, "operation:get")
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        op = repo.get(s, cluster.uuid, uuid)
        return OperationView(op, tuple(repo.tasks(s, [op.uuid])))


# -- the node agent's side --------------------------------------------------------


def _check_token(sealer: sealing.Sealer, node: str, token: str | None) -> None:
    if not token or not node or not sealer.node_token_valid(node, token):
        raise NotAuthenticated("a node agent's token is required (X-Shoal-Node-Token)")


def heartbeat(
    db: Database,
    sealer: sealing.Sealer,
    token: str | None,
    body: dict[str, Any],
    interval: float,
) -> dict[str, Any]:
    """A node's agent is alive; the task it should run now, if any, and when to report
    again (`interval` seconds)."""
    node = str(body.get("node") or "")
    _check_token(sealer, node, token)
    with db.write() as s:
        missing = node_programs.missing_reason(body.get("services"))
        if repo.heartbeat(s, node, utcnow(), missing) is None:
            raise NotAuthenticated("this node is not known to shoal (any more)")
        task = repo.task_for(s, node)
    out: dict[str, Any] = {"interval": interval, "task": None}
    if task is not None:
        out["task"] = {"uuid": task.uuid, "kind": task.kind, "params": task.params}
    return out


def report(
    db: Database, sealer: sealing.Sealer, token: str | None, task: str, body: dict[str, Any]
) -> None:
    """A task's progress or end, from the agent of the node it belongs to."""
    node = str(body.get("node") or "")
    state = body.get("state")
    if state not in (ops.RUNNING, ops.SUCCEEDED, ops.FAILED):
        raise Invalid("state must be RUNNING, SUCCEEDED or FAILED", "state")
    output = body.get("output")
    if output is not None and not isinstance(output, str):
        raise Invalid("output must be text", "output")
    code = body.get("exit_code")
    if code is not None:
        code = v.integer("exit_code", code, lo=-(2**31), hi=2**31 - 1)
    with db.write() as s:
        owner = repo.task_node(s, task)
        _check_token(sealer, owner or node, token)
        repo.report(s, owner or "", task, str(state), (output or "")[-16384:], code, utcnow())
