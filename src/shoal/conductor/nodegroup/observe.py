"""Observe: fold the group's listing (one driver call) into its node rows: states,
addresses and zones as they come, and what failed.

A failed machine is one of three things (domain/health.py decides the rules):
- refused after all: its fault says "no valid host" (that zone is avoided, the
  node is placed again elsewhere) or "quota exceeded" (the group waits);
- a failed boot (never ready): replaced after a delay that grows with each round;
- unhealthy (it was ready, then failed or vanished): repaired, unless the group's
  health policy says too many are unhealthy; then they are kept and repairs stop.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from shoal.conductor import pacing
from shoal.conductor.nodegroup import hosted, spec
from shoal.conductor.nodegroup.operate import DriverOp
from shoal.conductor.nodegroup.state import Pass
from shoal.domain import conditions as cond
from shoal.domain import health, kubenodes, merge, revision
from shoal.domain.model import ROLE_MASTER, Node, NodeState
from shoal.drivers.contract import BlockedError, BlockedKind, Feature, Machine, MachineState

DELETED_OUTSIDE = "its machine is being deleted in the provider, not by shoal"


def observe(p: Pass) -> None:
    """Fold the listing into the node rows, then decide about what failed."""
    ready_before = sum(1 for n in p.nodes.values() if n.state is NodeState.ACTIVE)
    for node in list(p.nodes.values()):
        m = p.machines.get(node.uuid)
        if node.state is NodeState.DELETING:
            if m is None:
                p.deleted(node)
            elif m.state is not MachineState.DELETING:
                p.to_delete.append(node.uuid)
            continue
        if m is None:
            if node.state in (NodeState.PENDING, NodeState.BUILDING):
                p.to_ensure.append(node.uuid)
            elif node.ready_at is not None:
                _unhealthy(p, node, "its machine is gone")
            else:
                p.drop(node)
            continue
        fold(p, node, m)
    owned = set(p.nodes)
    for uid, m in p.machines.items():
        if uid in owned or m.state is MachineState.DELETING:
            continue
        if m.state is MachineState.ERROR:
            p.to_delete.append(m.machine_id)  # broken and nobody's: nothing worth keeping
        else:
            adopt(p, uid, m)
    for node in list(p.nodes.values()):
        if node.uuid in p.memory.drains:
            continue  # being drained: on its way out already
        if node.state is NodeState.ACTIVE and node.uuid not in {n.uuid for n in p.unhealthy}:
            why = _silent(p, node)
            if why is None and (why := _kube_unready(p, node)) is not None and _sole_master(p):
                p.held.append((node, why))  # reported, never repaired: see _sole_master
                continue
            if why is not None:
                p.unhealthy.append(p.set(node, reason=why))
            elif node.repair_step:
                p.set(node, repair_step=0, repair_at=None, reason=None)
                p.event("Repaired", f"node {node.name} is healthy again", node=node.uuid)
    ready = sum(1 for n in p.nodes.values() if n.state is NodeState.ACTIVE)
    if ready > ready_before:
        p.memory = health.recovered(p.memory)
    if p.failed_boots:
        p.memory = health.failed(
            p.memory, p.now, p.failed_boots[-1], p.snap.group.generation, pacing.HEALTH
        )
    repair(p)
    if p.memory.drains:  # forget the drains of nodes gone or on their way
        going = {n.uuid for n in p.nodes.values() if n.state is not NodeState.DELETING}
        p.memory = health.drains_kept(p.memory, going)


def adopt(p: Pass, uid: str, m: Machine) -> None:
    """A machine tagged for this group whose row is missing (a restored backup, a
    database copied half-way) becomes a node of the group again instead of being
    deleted and made anew; scaling then removes only what the group does not want."""
    g = p.snap.group
    volumes = merge.volumes(g.spec, p.snap.cluster_attrs)
    made_from = revision.of(m.image_id, m.flavor_id, *volumes)
    # The same columns as any new node's row (one bulk insert); the next pass folds
    # in its state, address and readiness like any other node's.
    row = {
        "uuid": uid, "name": m.name, "cluster_uuid": g.cluster_id, "nodegroup_uuid": g.uuid,
        "project_id": g.project_id, "state": NodeState.BUILDING.value,
        "availability_zone": m.availability_zone, "to_delete": False, "created_at": p.now,
        "image_id": m.image_id, "flavor_id": m.flavor_id, "revision": made_from,
        "vm_slot": None, "provider_index": None, "building_at": p.now,
    }  # fmt: skip
    p.w.inserts.append(row)
    p.nodes[uid] = Node(0, uid, m.name, g.cluster_id, g.uuid, g.project_id,
                        NodeState.BUILDING, m.availability_zone, image_id=m.image_id,
                        flavor_id=m.flavor_id, created_at=p.now,
                        revision=made_from, building_at=p.now)  # fmt: skip
    p.progress = True
    p.event(
        "MachineAdopted",
        f"machine {m.name} carries this group's tags but had no row (a restored or copied "
        "database?): adopted, not replaced",
        warning=True,
        node=uid,
    )


def fold(p: Pass, node: Node, m: Machine, made_at: datetime | None = None) -> None:
    """One node row against its machine. A machine whose provider id changed under a
    node that had one was replaced in the provider behind shoal's back (Heat replacing a
    member marked unhealthy): the node follows it, booting again until it is up.
    `made_at`: this pass's create of the machine was taken then (its boot starts there,
    not at the pass's start)."""
    changes: dict[str, Any] = {}
    replaced = bool(node.provider_id and m.provider_id and m.provider_id != node.provider_id)
    if m.availability_zone and m.availability_zone != node.availability_zone:
        changes["availability_zone"] = m.availability_zone
    if m.provider_id and m.provider_id != node.provider_id:
        changes["provider_id"] = m.provider_id
    if replaced:
        p.event(
            "MachineReplaced",
            f"node {node.name}: its machine is now {m.provider_id} in the provider, no longer "
            f"{node.provider_id} (replaced there, as Heat replaces a member marked unhealthy); "
            "the node follows it",
            warning=True,
            node=node.uuid,
        )
    if m.address and m.address != node.address:
        changes["address"] = m.address
    if m.provider_index and m.provider_index != node.provider_index:
        changes["provider_index"] = m.provider_index
    if m.state is MachineState.DELETING and not node.to_delete:
        # Being deleted in the provider, not by shoal (shoal marks a node before it
        # deletes its machine): a ready node is lost like one whose machine is gone.
        if changes:
            node = p.set(node, **changes)
        _deleted_outside(p, node)
        return
    if m.state is MachineState.DELETING:
        changes["state"] = NodeState.DELETING
    elif m.state is MachineState.ERROR:
        if changes:
            node = p.set(node, **changes)
        _failed(p, node, m)
        return
    elif m.state is MachineState.ACTIVE and node.state is not NodeState.ACTIVE:
        changes.update(
            state=NodeState.ACTIVE,
            ready_at=node.ready_at or ready_time(m, node, p.now),
            reason=None,
        )
    elif m.state is MachineState.BUILDING and (
        node.state is NodeState.PENDING or (replaced and node.state is NodeState.ACTIVE)
    ):
        changes.update(state=NodeState.BUILDING, building_at=made_at or p.now)
    elif m.state is MachineState.BUILDING and made_at is not None:
        changes["building_at"] = made_at  # made again by this pass
    if changes:
        p.progress = True
        p.set(node, **changes)


def ready_time(m: Machine, node: Node, seen: datetime) -> datetime:
    """When `node`'s machine, seen ready at `seen`, became ready: when its provider says,
    if it says so and that lies between the node's create and `seen`; else `seen` (a
    time outside them is another clock's)."""
    since = node.building_at or node.created_at
    said = m.ready_at
    if said is None or said > seen or (since is not None and said < since):
        return seen
    return said


def _deleted_outside(p: Pass, node: Node) -> None:
    """A node whose machine someone else deletes (an operator's `server delete`, the
    cloud's own cleanup): once ready, unhealthy and replaced by the repair ladder (its
    breaker counts it); before, dropped with a word, and scaling makes its successor."""
    if node.ready_at is not None:
        _unhealthy(p, node, DELETED_OUTSIDE)
        return
    p.progress = True
    p.set(node, state=NodeState.DELETING, reason=DELETED_OUTSIDE)
    p.event(
        "MachineDeleted",
        f"node {node.name}: {DELETED_OUTSIDE} before it was ready; a new node takes its place",
        warning=True,
        node=node.uuid,
    )


def _failed(p: Pass, node: Node, m: Machine) -> None:
    """A machine in ERROR: refused after all, a failed boot, or an unhealthy node."""
    fault = m.fault or "the cloud reports the machine in ERROR without a reason"
    zone = m.availability_zone or node.availability_zone
    if m.fault_kind is BlockedKind.NO_VALID_HOST:
        if zone is not None:
            p.memory = health.block_zone(p.memory, zone, p.now, pacing.HEALTH)
        p.errors.append(BlockedError(fault, BlockedKind.NO_VALID_HOST, az=zone))
        others = ", ".join(z for z in p.open_zones()) or "no other zone of the group"
        where = f" in {zone}" if zone else ""
        p.event(
            "NoValidHost",
            f"node {node.name} failed: no valid host{where} ({fault}); placing a new node in "
            f"{others}",
            warning=True,
            node=node.uuid,
        )
        _replace(p, node, fault)
    elif m.fault_kind is BlockedKind.QUOTA:
        p.errors.append(BlockedError(fault, BlockedKind.QUOTA))
        p.failed_boots.append(fault)
        p.event("QuotaExceeded", f"node {node.name} failed: {fault}", warning=True, node=node.uuid)
        _replace(p, node, fault)
    elif node.ready_at is None:
        p.failed_boots.append(fault)
        p.event(
            "MachineError",
            f"node {node.name} failed to boot ({fault}); it will be replaced",
            warning=True,
            node=node.uuid,
        )
        _replace(p, node, fault)
    else:
        _unhealthy(p, node, f"its machine failed ({fault})")


def _replace(p: Pass, node: Node, reason: str) -> None:
    """Delete the node's machine and forget the node: scaling adds a new one. A node
    Kubernetes runs on is drained first (`Pass.drained`): meanwhile it is marked
    `to_delete`, so the next passes go on with it and scaling adds its successor."""
    if p.machines.get(node.uuid) is not None and not p.drained(node):
        p.set(node, reason=reason, to_delete=True)
        return
    p.set(node, state=NodeState.DELETING, reason=reason)
    m = p.machines.get(node.uuid)
    if m is None:
        p.drop(p.nodes[node.uuid])
    elif m.state is not MachineState.DELETING:
        p.to_delete.append(node.uuid)


def _unhealthy(p: Pass, node: Node, why: str) -> None:
    """A node that was ready and is not any more: repaired or kept (`repair`)."""
    if node.state is not NodeState.ERROR or node.reason != why:
        node = p.set(node, state=NodeState.ERROR, reason=why)
    p.unhealthy.append(node)


def _climb(p: Pass, node: Node) -> None:
    """The next rung of the repair ladder for `node`, if its time has come."""
    policy = p.snap.group.spec.health
    wait = timedelta(seconds=policy.unhealthy_timeout_s)
    host_up = hosted.host_ready(p, node)
    if host_up and node.repair_step and node.repair_at is not None:
        given = node.repair_at + wait
        if p.now < given:
            p.look_again(given)
            return  # the last rung is still being given its time
    rung = health.next_rung(
        node.repair_step, _has_machine(p, node), Feature.REBOOT in p.features,
        Feature.REBUILD in p.features, host_up,
    )  # fmt: skip
    why = node.reason or "unhealthy"
    failover = (
        "" if host_up else f" on another host (its virt host {node.availability_zone} is not ready)"
    )
    p.event(
        "Repairing",
        f"node {node.name} was ready, but {why}; {health.RUNG_WORDS[rung]} it{failover}",
        warning=True,
        node=node.uuid,
    )
    if rung == health.REPLACE:
        p.memory = health.replacing(p.memory, node.name, why)
        _replace(p, node, why)
        return
    params = {"image_id": spec.probe(p).image_id} if rung == health.REBUILD else {}
    p.driver_ops.append(DriverOp(rung, node.uuid, params, ""))
    p.set(node, repair_step=health.RUNGS.index(rung) + 1, repair_at=p.now)
    p.look_again(p.now + wait)


def _has_machine(p: Pass, node: Node) -> bool:
    """Whether the node still has a machine a reboot or a rebuild could work on."""
    m = p.machines.get(node.uuid)
    return m is not None and m.state is not MachineState.DELETING


def _sole_master(p: Pass) -> bool:
    """Whether the group is a cluster's only master. Kubernetes reporting it NotReady
    while its API server answers means the control plane runs and its kubelet does
    not: replacing the machine would lose etcd's data, so that is reported, never
    repaired (a silent agent or a failed machine still is)."""
    g = p.snap.group.spec
    return g.role == ROLE_MASTER and g.node_count <= 1


def _silent(p: Pass, node: Node) -> str | None:
    """Why a ready node's agent counts as silent (None: it reports, or none is
    expected): no heartbeat for the health policy's unhealthy timeout, or, where
    the provider's nodes run the agent, none since the startup timeout after the
    node was ready. A node in a repair rung is given that rung's time first."""
    policy = p.snap.group.spec.health
    if node.agent_seen_at is not None:
        silent_at = node.agent_seen_at + timedelta(seconds=policy.unhealthy_timeout_s)
        if p.now > silent_at:
            return f"its agent has not reported for over {policy.unhealthy_timeout_s} s"
        p.look_again(silent_at)
        return None
    if p.agents_expected and node.ready_at is not None:
        limit = policy.startup_timeout_s
        silent_at = node.ready_at + timedelta(seconds=limit)
        if p.now > silent_at:
            return f"its agent never reported in the {limit} s after it was ready"
        p.look_again(silent_at)
    return None


def _kube_unready(p: Pass, node: Node) -> str | None:
    """Why Kubernetes makes a ready node unhealthy (`kubenodes.unready`: its Node not
    Ready for the unhealthy timeout, or never registered in the startup timeout);
    None where the cluster's API server was not read or did not answer."""
    if p.kube is None:
        return None
    policy = p.snap.group.spec.health
    why, deadline = kubenodes.unready(
        p.kube.nodes.get(node.name),
        p.kube.reachable,
        p.now,
        policy.unhealthy_timeout_s,
        node.ready_at,
        policy.startup_timeout_s,
    )
    if deadline is not None:
        p.look_again(deadline)
    return why


def repair(p: Pass) -> None:
    """Repair the unhealthy nodes by a ladder: reboot, then rebuild, then replace
    (each rung given the health policy's unhealthy timeout to work; a rung the
    provider cannot do is skipped) — unless more than the policy's
    `max_unhealthy_percent` of the desired nodes (at least one) are unhealthy: then
    keep them (for inspection) and stop repairing until someone acts."""
    if not p.unhealthy:
        return
    g = p.snap.group
    limit = g.spec.health.max_unhealthy_percent
    bad, desired = len(p.unhealthy), g.spec.node_count
    if health.repairs_allowed(bad, desired, limit):
        for node in p.unhealthy:
            _climb(p, node)
        p.unhealthy = []
        return
    names = ", ".join(n.name for n in p.unhealthy[:10]) + (" ..." if bad > 10 else "")
    p.repairs_stopped = (
        f"repairs stopped: {bad} of {desired} node(s) are unhealthy ({names}), more than "
        f"health_policy.max_unhealthy_percent ({limit} %) allows "
        f"({health.unhealthy_allowed(desired, limit)} at most); they are kept for "
        "inspection. Remove them (resize --nodes-to-remove) or raise the limit (PATCH "
        "health_policy), and repairs resume"
    )
    if not any(c.reason == cond.MAX_UNHEALTHY for c in g.conditions):
        p.event("RepairsStopped", f"node group {g.name}: {p.repairs_stopped}", warning=True)
