"""Remove and scale: nodes named in a resize go, exactly those; then the number of
live nodes is brought to the desired count (an unnamed scale-down in
`domain/deletion.py` order, a scale-up spread over the group's zones)."""

from __future__ import annotations

import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from shoal.conductor import pacing
from shoal.conductor.nodegroup import hosted, spec
from shoal.conductor.nodegroup.state import LIVE, Pass
from shoal.domain import deletion, health, naming, placement, revision
from shoal.domain.model import Node, NodeState
from shoal.drivers.contract import BlockedError, BlockedKind

HOLDING = (*LIVE, NodeState.ERROR)

# Which of some names a node of a cluster already has: (cluster uuid, names) -> taken.
TakenNames = Callable[[str, Collection[str]], set[str]]
# Names are drawn from 36^5 suffixes: a clash twice in a row is already rare.
NAME_ROUNDS = 20


def remove_marked(p: Pass) -> None:
    """Nodes named in a resize (`to_delete`) go, exactly those."""
    for node in list(p.nodes.values()):
        if node.to_delete and node.state is not NodeState.DELETING:
            if node.uuid not in p.memory.drains:  # said once, not on each pass of a drain
                p.event("NodeRemoved", f"removing node {node.name} as requested", node=node.uuid)
            p.retire(node)


def scale(p: Pass, first_wave: int) -> None:
    """Make the number of live nodes equal the desired count. A new group bigger than
    `first_wave` starts with that many: its first machines (and the cloud's first
    answers: a rate limit, a quota) come before the rest of its intent is
    written; the next pass, due at once, adds the rest. A small group is added
    whole: an extra pass would cost it a listing."""
    g = p.snap.group
    # Unhealthy nodes kept by the health policy's breaker hold their places.
    live = [n for n in p.nodes.values() if n.state in HOLDING and not n.to_delete]
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
            p.retire(v)
    elif len(live) < desired:
        if _waiting(p):
            return
        count = desired - len(live)
        if not p.snap.nodes and count > first_wave:
            count, p.deferred = first_wave, True
        add(p, count, live)


def _waiting(p: Pass) -> bool:
    """Whether new machines must wait: machines keep failing (the retry delay has not
    passed), or every zone of the group had no valid host lately."""
    hold = health.retry_at(p.memory, pacing.HEALTH)
    if hold is not None and hold > p.now:
        p.waiting_until = hold
        return True
    if p.zones and not p.open_zones():
        ends = [t for z, t in p.memory.zone_blocks.items() if z in p.zones]
        p.waiting_until = min(ends)
        zones = ", ".join(p.zones)
        if not any(isinstance(e, BlockedError) for e in p.errors):
            p.errors.append(
                BlockedError(
                    f"no valid host in any zone of the group ({zones}) lately",
                    BlockedKind.NO_VALID_HOST,
                )
            )
        return True
    return False


def add(p: Pass, count: int, live: list[Node]) -> None:
    """Write intent rows for `count` new nodes: final name, uuid and zone."""
    g = p.snap.group
    slots: list[str | None] = []
    if p.virt is not None:  # VMs of virt hosts: a free slot each, its host the zone
        chosen = hosted.assign(p, count, live)
        if not chosen:
            return
        zones: list[str | None] = [host for _, host in chosen]
        slots = [key for key, _ in chosen]
        count = len(chosen)
    else:
        zones = list(placement.spread(p.open_zones(), [n.availability_zone for n in live], count))
        slots = [None] * count
    taken = {n.name for n in p.nodes.values()}
    names: list[str] = []
    for _ in zones:  # against the group's names and those drawn here; settle_names checks
        names.append(naming.node_name(p.snap.cluster_name, g.name, taken))  # the cluster's
        taken.add(names[-1])
    probe = spec.probe(p)
    target = revision.of_group(g.spec, p.snap.cluster_attrs)
    for az, name, slot in zip(zones, names, slots, strict=True):
        uid = str(uuidlib.uuid4())
        row = {
            "uuid": uid, "name": name, "cluster_uuid": g.cluster_id, "nodegroup_uuid": g.uuid,
            "project_id": g.project_id, "state": NodeState.PENDING.value,
            "availability_zone": az, "to_delete": False, "created_at": p.now,
            "image_id": probe.image_id, "flavor_id": probe.flavor_id, "revision": target,
            "vm_slot": slot, "provider_index": None, "building_at": None,
        }  # fmt: skip
        p.w.inserts.append(row)
        p.nodes[uid] = Node(0, uid, name, g.cluster_id, g.uuid, g.project_id,
                            NodeState.PENDING, az, created_at=p.now,
                            revision=target, vm_slot=slot)  # fmt: skip
        p.to_ensure.append(uid)
    p.progress = True
    p.event("ScalingUp", f"adding {count} node(s) to node group {g.name}")


def settle_names(passes: list[Pass], taken_names: TakenNames) -> None:
    """Make the new nodes' names (drawn against their own group's) unique in their
    cluster: one lookup on just these names per cluster of a batch; a name taken,
    or drawn twice, is drawn again and checked again."""
    clusters: dict[str, list[Pass]] = {}
    for p in passes:
        if p.w.inserts:
            clusters.setdefault(p.snap.group.cluster_id, []).append(p)
    for cluster, mine in clusters.items():
        _settle_cluster_names(cluster, mine, taken_names)


def _settle_cluster_names(cluster: str, passes: list[Pass], taken_names: TakenNames) -> None:
    rows = [(p, row) for p in passes for row in p.w.inserts]
    check = rows
    for _ in range(NAME_ROUNDS):
        if not check:
            return
        clash = taken_names(cluster, {row["name"] for _, row in check})
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
    raise RuntimeError(f"could not draw unique node names in cluster {cluster}")
