"""The node group reconciler: one pass makes one node group a step closer to its spec.

Skeleton (Cluster API style): observe the cloud in bulk (one listing), load a
snapshot, run the phases (observe -> remove -> scale), commit the intent (new
node rows with final names and ids, DELETING marks) BEFORE calling the
provider, act (parallel driver calls), then write status, conditions and
events in one place and requeue. Deletion has its own path. Small groups due
together go through one pass as a batch (`reconcile_batch`): each keeps its
own phases, status and requeue time; the reads, writes and calls are shared.
"""

from __future__ import annotations

import uuid as uuidlib
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from shoal.conductor.context import Context
from shoal.conductor.reconcilers import actions, ngdelete, ngstatus
from shoal.db import work
from shoal.domain import deletion, naming, placement
from shoal.domain import status as st
from shoal.domain.model import ROLE_MASTER, Node, NodeState
from shoal.drivers.contract import (
    TAG_NODE,
    TAG_NODEGROUP,
    DriverError,
    Machine,
    MachineSpec,
    MachineState,
    TransientError,
)

LIVE = (NodeState.PENDING, NodeState.BUILDING, NodeState.ACTIVE)
# While creates are paced by the provider's rate limit (the throttle learned a
# pace), a pass starts no create after this long; its remaining intent rows are
# created by the next pass, due at once but behind groups waiting longer, so that
# a provider's rate limit is shared by every group (no tail of late groups) and
# no group waits long for a free worker.
CREATE_PASS_BUDGET_S = 0.5


@dataclass
class Pass:
    """The working state of one pass over one node group."""

    snap: work.GroupSnapshot
    now: datetime
    machines: dict[str, Machine]
    nodes: dict[str, Node]  # by uuid; the view as this pass changes it
    w: work.GroupWrite = field(default_factory=work.GroupWrite)
    to_ensure: list[str] = field(default_factory=list)
    to_delete: list[str] = field(default_factory=list)  # machine ids
    errors: list[DriverError] = field(default_factory=list)
    progress: bool = False
    deferred: bool = False  # creates left for the next pass (due at once)
    _updates: dict[int, dict[str, Any]] = field(default_factory=dict)

    def set(self, node: Node, **changes: Any) -> Node:
        """Change a node in the view and queue the same change for the database."""
        new = replace(node, **changes)
        self.nodes[node.uuid] = new
        row = self._updates.setdefault(node.id, {"id": node.id})
        for k, v in changes.items():
            row[k] = v.value if isinstance(v, NodeState) else v
        row["updated_at"] = self.now
        return new

    def drop(self, node: Node) -> None:
        """Forget a node row (its machine is gone)."""
        self.nodes.pop(node.uuid, None)
        self._updates.pop(node.id, None)
        self.w.delete_ids.append(node.id)

    def flush_updates(self) -> None:
        """Move queued node changes into the write."""
        self.w.updates.extend(self._updates.values())
        self._updates.clear()

    def event(self, reason: str, message: str, *, warning: bool = False, node: str | None = None):  # type: ignore[no-untyped-def]
        self.w.events.append(
            work.EventIn(
                reason, message, "Warning" if warning else "Normal", self.snap.group.uuid, node
            )
        )


def reconcile(ctx: Context, ng_uuid: str) -> None:
    """One pass over node group `ng_uuid` (the caller holds its lease)."""
    reconcile_batch(ctx, [ng_uuid])


def reconcile_batch(ctx: Context, uuids: list[str]) -> None:
    """One pass over some node groups (the caller holds their leases; see
    work.claim_due_groups for which go together):
    each group is reconciled on its own, but their snapshots are read together,
    their intents committed in one transaction before any call, their creates
    and deletes run as one set of waves, and their outcomes written together."""
    now = ctx.now()
    # Listed on this worker's thread, not the driver pool's: a listing does not take
    # a create's place among the driver's `driver_concurrency` calls.
    listed = {u: _listing(ctx, u) for u in uuids}
    # The snapshots are read after the listings: every machine listed had its node
    # row committed before it was created (intent before action).
    snaps = work.load_groups(ctx.db, uuids)
    acting: list[Pass] = []
    done: list[Pass] = []
    for u in uuids:
        snap, got = snaps.get(u), listed[u]
        if snap is None:
            continue
        if isinstance(got, TransientError):
            ngstatus.write_transient(ctx, snap, now, got)
            continue
        p = Pass(
            snap,
            now,
            {m.tags.get(TAG_NODE, m.machine_id): m for m in got},
            {n.uuid: n for n in snap.nodes},
        )
        g = snap.group
        if g.deleting or snap.cluster_deleting:
            ngdelete.run(ctx, p)
        elif st.is_failed(g.status) and g.observed_generation >= g.generation:
            ngstatus.write_resting(ctx, p)  # FAILED waits for a retry (new generation)
        elif problems := _validate(ctx, p):
            ngstatus.conclude(ctx, p, permanent="; ".join(problems))
            done.append(p)
        else:
            observe(p)
            remove_marked(p)
            scale(ctx, p)
            p.flush_updates()
            acting.append(p)
    settle_names(ctx, acting)
    intents = [(p.snap, p.w) for p in acting if not p.w.empty()]
    if intents:  # intent before action
        ids = work.apply_groups(ctx.db, intents, now, holder=ctx.holder)
        for p in acting:  # the new rows' ids, for the changes the calls bring
            for uid in p.nodes.keys() & ids.keys():
                p.nodes[uid] = replace(p.nodes[uid], id=ids[uid])
            p.w = work.GroupWrite()
    act(ctx, acting)
    for p in acting:
        ngstatus.conclude(ctx, p)
    work.apply_groups(ctx.db, [(p.snap, p.w) for p in done + acting], now, holder=ctx.holder)


def _listing(ctx: Context, ng_uuid: str) -> list[Machine] | TransientError:
    """The group's machines, in one driver call; the error when it failed."""
    try:
        return ctx.call(lambda: ctx.driver.list_machines({TAG_NODEGROUP: ng_uuid}))
    except TransientError as exc:
        return exc


def _spec_for(p: Pass, node: Node) -> MachineSpec:
    g, a = p.snap.group, p.snap.cluster_attrs
    flavor = (
        g.spec.flavor_id
        or (a.get("master_flavor_id") if g.spec.role == "master" else None)
        or a.get("flavor_id")
    )
    return MachineSpec(
        machine_id=node.uuid,
        name=node.name,
        project_id=g.project_id,
        cluster_id=g.cluster_id,
        nodegroup_id=g.uuid,
        role=g.spec.role,
        flavor_id=str(flavor or ""),
        image_id=str(g.spec.image_id or a.get("image_id") or ""),
        availability_zone=node.availability_zone,
        docker_volume_size=g.spec.docker_volume_size or a.get("docker_volume_size"),
        labels=dict(g.spec.node_labels),
    )


def _validate(ctx: Context, p: Pass) -> list[str]:
    """Cheap checks of the group's spec (driver.validate: no remote I/O)."""
    probe = Node(
        0, "probe", "probe", p.snap.group.cluster_id, p.snap.group.uuid, "", NodeState.PENDING
    )
    spec = _spec_for(p, probe)
    problems = [] if spec.flavor_id else ["the node group has no flavor_id"]
    if not spec.image_id:
        problems.append("the node group has no image_id")
    problems += ctx.driver.validate(spec) if not problems else []
    for az in p.snap.group.spec.availability_zones:
        problems += ctx.driver.validate(replace(spec, availability_zone=az))
    return sorted(set(problems))


def observe(p: Pass) -> None:
    """Fold the listing into the node rows: states, addresses, zones, failures."""
    for node in list(p.nodes.values()):
        m = p.machines.get(node.uuid)
        if node.state is NodeState.DELETING:
            if m is None:
                p.drop(node)
            elif m.state is not MachineState.DELETING:
                p.to_delete.append(node.uuid)
            continue
        if m is None:
            if node.state in (NodeState.PENDING, NodeState.BUILDING):
                p.to_ensure.append(node.uuid)
            else:  # ACTIVE or ERROR and the machine is gone: replace it
                p.event(
                    "MachineLost",
                    f"machine of node {node.name} is gone; replacing it",
                    warning=True,
                    node=node.uuid,
                )
                p.drop(node)
            continue
        _fold(p, node, m)
    owned = set(p.nodes)
    for mid, m in p.machines.items():
        if mid not in owned and m.state is not MachineState.DELETING:
            p.to_delete.append(m.machine_id)  # tagged for this group, no row: an orphan


def _fold(p: Pass, node: Node, m: Machine) -> None:
    """One node row against its machine."""
    changes: dict[str, Any] = {}
    if m.availability_zone and m.availability_zone != node.availability_zone:
        changes["availability_zone"] = m.availability_zone
    if m.provider_id and m.provider_id != node.provider_id:
        changes["provider_id"] = m.provider_id
    if m.address and m.address != node.address:
        changes["address"] = m.address
    if m.state is MachineState.DELETING:
        changes["state"] = NodeState.DELETING
    elif m.state is MachineState.ERROR:
        reason = m.fault or "the cloud reports the server in ERROR"
        p.event(
            "MachineError",
            f"node {node.name} failed ({reason}); replacing it",
            warning=True,
            node=node.uuid,
        )
        changes.update(state=NodeState.DELETING, reason=reason)
        p.to_delete.append(node.uuid)
    elif m.state is MachineState.ACTIVE and node.state is not NodeState.ACTIVE:
        changes.update(state=NodeState.ACTIVE, ready_at=p.now, reason=None)
    elif m.state is MachineState.BUILDING and node.state is NodeState.PENDING:
        changes["state"] = NodeState.BUILDING
    if changes:
        p.progress = True
        p.set(node, **changes)


def _retire(p: Pass, node: Node) -> None:
    """Mark a node for deletion: its machine is deleted, then its row."""
    if node.uuid in p.to_ensure:
        p.to_ensure.remove(node.uuid)
    m = p.machines.get(node.uuid)
    if m is None:
        p.drop(node)  # never created (or already gone): nothing to delete
        return
    p.set(node, state=NodeState.DELETING)
    if m.state is not MachineState.DELETING:
        p.to_delete.append(node.uuid)


def remove_marked(p: Pass) -> None:
    """Nodes named in a resize (`to_delete`) go, exactly those."""
    for node in list(p.nodes.values()):
        if node.to_delete and node.state is not NodeState.DELETING:
            p.event("NodeRemoved", f"removing node {node.name} as requested", node=node.uuid)
            _retire(p, node)


def scale(ctx: Context, p: Pass) -> None:
    """Make the number of live nodes equal the desired count."""
    g = p.snap.group
    live = [n for n in p.nodes.values() if n.state in LIVE and not n.to_delete]
    desired = g.spec.node_count
    if len(live) > desired:
        victims = deletion.choose(live, len(live) - desired, g.spec.deletion_policy)
        p.event(
            "ScalingDown",
            f"removing {len(victims)} node(s): "
            + ", ".join(v.name for v in victims[:20])
            + (" ..." if len(victims) > 20 else ""),
        )
        for v in victims:
            _retire(p, v)
    elif len(live) < desired:
        count = desired - len(live)
        wave = max(work.BATCH_NODES, ctx.settings.driver_concurrency)
        if not p.snap.nodes and count > wave:
            # A new big group starts with one wave: its first machines (and the
            # cloud's first answers: a rate limit, a quota) come before the rest of
            # its intent is written; the next pass, due at once, adds the rest. A
            # small group is added whole: an extra pass would cost it a listing.
            count, p.deferred = wave, True
        _add(p, count, live)


def _add(p: Pass, count: int, live: list[Node]) -> None:
    """Write intent rows for `count` new nodes: final name, uuid and zone."""
    g = p.snap.group
    zones = placement.spread(g.spec.availability_zones, [n.availability_zone for n in live], count)
    taken = {n.name for n in p.nodes.values()}
    names: list[str] = []
    for _ in zones:  # against the group's names and those drawn here; settle_names checks
        names.append(naming.node_name(p.snap.cluster_name, g.name, taken))  # the cluster's
        taken.add(names[-1])
    probe = _spec_for(p, Node(0, "", "", g.cluster_id, g.uuid, g.project_id, NodeState.PENDING))
    for az, name in zip(zones, names, strict=True):
        uid = str(uuidlib.uuid4())
        row = {
            "uuid": uid, "name": name, "cluster_uuid": g.cluster_id, "nodegroup_uuid": g.uuid,
            "project_id": g.project_id, "state": NodeState.PENDING.value,
            "availability_zone": az, "to_delete": False, "created_at": p.now,
            "image_id": probe.image_id, "flavor_id": probe.flavor_id,
        }  # fmt: skip
        p.w.inserts.append(row)
        p.nodes[uid] = Node(0, uid, name, g.cluster_id, g.uuid, g.project_id,
                            NodeState.PENDING, az, created_at=p.now)  # fmt: skip
        p.to_ensure.append(uid)
    p.progress = True
    p.event("ScalingUp", f"adding {count} node(s) to node group {g.name}")


def settle_names(ctx: Context, passes: list[Pass]) -> None:
    """Make the new nodes' names (drawn against their own group's) unique in their
    cluster: one query on just these names per cluster of a batch; a name taken,
    or drawn twice, is drawn again and checked again."""
    clusters: dict[str, list[Pass]] = {}
    for p in passes:
        if p.w.inserts:
            clusters.setdefault(p.snap.group.cluster_id, []).append(p)
    for cluster, mine in clusters.items():
        _settle_cluster_names(ctx, cluster, mine)


def _settle_cluster_names(ctx: Context, cluster: str, passes: list[Pass]) -> None:
    rows = [(p, row) for p in passes for row in p.w.inserts]
    check = rows
    while check:
        clash = work.taken_names(ctx.db, cluster, {row["name"] for _, row in check})
        drawn = Counter(row["name"] for _, row in rows)
        again: list[tuple[Pass, dict[str, Any]]] = []
        for p, row in check:
            if row["name"] in clash or drawn[row["name"]] > 1:
                drawn[row["name"]] -= 1
                taken = clash | set(drawn) | {n.name for n in p.nodes.values()}
                row["name"] = naming.node_name(p.snap.cluster_name, p.snap.group.name, taken)
                drawn[row["name"]] += 1
                p.nodes[row["uuid"]] = replace(p.nodes[row["uuid"]], name=row["name"])
                again.append((p, row))
        check = again


def act(ctx: Context, passes: list[Pass]) -> None:
    """Call the provider for the passes of a batch: deletes, then creates (one set of
    waves for all the groups); fold the answers into each pass's view."""
    deletes = {mid: p for p in passes for mid in p.to_delete}
    if deletes:
        for mid, err in actions.delete_all(ctx, list(deletes)).items():
            p = deletes[mid]
            p.errors.append(err)
            p.event(
                "DeleteRetry",
                f"delete of machine {mid} will be retried: {err.reason}",
                warning=True,
                node=mid,
            )
    owner: dict[str, Pass] = {}
    # Masters first (their own waves): the control plane boots before the workers queue.
    tiers: tuple[list[tuple[MachineSpec, list[str]]], ...] = ([], [])
    for p in passes:
        # Every row is committed here, with its id (the snapshot's, or the intent
        # write's RETURNING).
        pending = [p.nodes[u] for u in p.to_ensure if u in p.nodes]
        zones = list(p.snap.group.spec.availability_zones)
        tier = tiers[0 if p.snap.group.spec.role == ROLE_MASTER else 1]
        for n in pending:
            owner[n.uuid] = p
            tier.append((_spec_for(p, p.nodes[n.uuid]), zones))
    if not owner:
        return
    errors_before = {id(p): len(p.errors) for p in passes}
    asked = {id(p): 0 for p in passes}
    answered = dict(asked)
    for uid in owner:
        asked[id(owner[uid])] += 1
    results = [r for t in tiers if t for r in actions.ensure_all(ctx, t, CREATE_PASS_BUDGET_S)]
    for r in results:
        p = owner[r.spec.machine_id]
        answered[id(p)] += 1
        node = p.nodes[r.spec.machine_id]
        for frm, to, why in r.moves:
            p.event(
                "NoValidHost",
                f"no valid host in {frm} for node {node.name} ({why}); placed it in {to}",
                warning=True,
                node=node.uuid,
            )
        if r.machine is not None:
            _fold(p, node, r.machine)
            node = p.nodes[node.uuid]
            if r.machine.state is MachineState.BUILDING and node.state is NodeState.PENDING:
                p.set(node, state=NodeState.BUILDING)
            p.progress = True
        elif r.error is not None:
            p.errors.append(r.error)
            if node.reason != r.error.reason:
                p.set(node, reason=r.error.reason)
    for p in passes:
        # Stopped by the time budget, not by an error: the rest go in the next pass.
        stopped = answered[id(p)] < asked[id(p)] and len(p.errors) == errors_before[id(p)]
        p.deferred = p.deferred or stopped
        p.flush_updates()
