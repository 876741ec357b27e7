"""Virt hosts in the services: a request that would take down hosts carrying VMs
(deleting or shrinking a role=virt group) is refused with a warning naming the
VM nodes, unless forced; a `vms` entry a node holds cannot be removed."""

from __future__ import annotations

from collections.abc import Sequence

from shoal.db.records import Session
from shoal.db.repo import nodes
from shoal.domain import deletion, virt
from shoal.domain import model as m
from shoal.domain.errors import Conflict

FORCE_HINT = (
    "move them first (replace them, or resize their groups), or force it "
    "(`--force`; `force: true` in a resize body, `?force=true` on DELETE) to take them down"
)


def vm_nodes(s: Session, cluster_uuid: str) -> dict[str, str]:
    """The nodes of the cluster on VMs of virt hosts: node name -> its host's name."""
    return {
        n.name: n.availability_zone or ""
        for n in nodes.vm_holders(s, cluster_uuid)
        if n.state is not m.NodeState.DELETING
    }


def refuse_taking_down(
    s: Session, cluster_uuid: str, group: str, hosts: Sequence[str], force: bool, what: str
) -> None:
    """Conflict when `hosts` (of virt group `group`) carry VMs and `force` is not set."""
    if force or not hosts:
        return
    carried = virt.on_hosts(hosts, vm_nodes(s, cluster_uuid))
    if carried:
        shown = ", ".join(carried[:20]) + (" ..." if len(carried) > 20 else "")
        raise Conflict(
            f"{what} would take down virt host(s) of node group {group} carrying "
            f"{len(carried)} VM node(s): {shown}; {FORCE_HINT}"
        )


def going_on_shrink(
    group_nodes: Sequence[m.Node], named: Sequence[m.Node], count: int, policy: m.DeletionPolicy
) -> list[str]:
    """The hosts a resize to `count` takes away: those named, then the ones the
    group's deletion policy picks (as the conductor will)."""
    live = [n for n in group_nodes if n.state is not m.NodeState.DELETING and not n.to_delete]
    going = [n for n in named if n in live]
    rest = [n for n in live if n not in going]
    extra = max(0, len(live) - count - len(going))
    going += deletion.choose(rest, extra, policy) if extra else []
    return [n.name for n in going]


def refuse_removing_taken_slots(
    s: Session, cluster_uuid: str, group_uuid: str, old: m.NodeGroupSpec, new: m.NodeGroupSpec
) -> None:
    """Conflict when a changed `vms` drops (or reshapes) a slot a node holds."""
    before = {sl.key: sl for sl in virt.slots(group_uuid, old.vms)}
    after = {sl.key: sl for sl in virt.slots(group_uuid, new.vms)}
    changed = {k for k, sl in before.items() if after.get(k) != sl}
    if not changed:
        return
    holders = sorted(
        f"{n.name} (VM {n.vm_slot.rsplit(':', 1)[1]})"
        for n in nodes.vm_holders(s, cluster_uuid)
        if n.vm_slot in changed and n.state is not m.NodeState.DELETING
    )
    if holders:
        raise Conflict(
            f"vms: the VM(s) held by {', '.join(holders[:20])} would be removed or changed; "
            "remove those nodes first (resize their group with --nodes-to-remove), then "
            "change vms"
        )
