"""Node groups on VMs of their cluster's virt hosts (a hosted provider,
`domain/virt.py`): each new node takes a free VM slot (its zone is the slot's host),
and its machine spec carries the slot's shape, variables, template and host (as a
value: the driver keeps no idea of its own of which cluster has which hosts; it
reads the ready hosts from `contract.VirtHosts` when it lists).

A group whose hosts are not ready waits (Blocked, "no virt host is ready yet"),
and so does one with no free slot, with the reason saying what to add. Masters
also wait while hosts are still booting, so that they spread over all of them.
"""

from __future__ import annotations

from collections import Counter

from shoal.conductor.nodegroup.state import Pass
from shoal.db.virthosts import VirtView
from shoal.domain import virt
from shoal.domain.model import ROLE_MASTER, Node
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    VirtHost,
    VmShape,
)


def assign(p: Pass, count: int, live: list[Node]) -> list[tuple[str, str]]:
    """(slot key, host name) for up to `count` new nodes of the group: as many as free
    slots allow; when fewer, the reason goes into the pass's errors (Blocked)."""
    view = p.virt
    assert view is not None
    g = p.snap.group
    if g.spec.role == ROLE_MASTER and view.booting:  # masters spread: wait for every host
        ready = len(view.hosts)
        why = (
            f"waiting for the virt hosts still booting ({ready} of {ready + view.booting} "
            "ready), so that the masters spread over them"
        )
        p.errors.append(BlockedError(why, BlockedKind.NO_VALID_HOST))
        return []
    taken = set(view.taken)
    members = Counter(n.availability_zone for n in live if n.availability_zone)
    out: list[tuple[str, str]] = []
    for _ in range(count):
        free = [s for s in view.slots if s.key not in taken]
        choice = virt.choose(g.name, free, view.hosts, members, p.open_zones())
        if isinstance(choice, str):
            p.errors.append(BlockedError(choice, BlockedKind.NO_VALID_HOST))
            break
        taken.add(choice.slot.key)
        members[choice.host.name] += 1
        out.append((choice.slot.key, choice.host.name))
    return out


def host_ready(p: Pass, node: Node) -> bool:
    """Whether the virt host a VM node runs on is among its cluster's ready hosts
    (true for a node that is no VM: it has no host to lose)."""
    return p.virt is None or not node.vm_slot or _host_of(p.virt, node) is not None


def _host_of(view: VirtView, node: Node) -> virt.Host | None:
    """The ready host of `view` that VM node `node` runs on (None: not ready, or gone)."""
    return next((h for h in view.hosts if h.name == node.availability_zone), None)


def shape(p: Pass, node: Node) -> VmShape | None:
    """The VM shape of a node that took a slot (None: no slot, or it is gone)."""
    view = p.virt
    slot = view.slot(node.vm_slot) if view is not None else None
    if view is None or slot is None:
        return None
    on = _host_of(view, node)
    # Its group's provider ("" when the group names none: the deployment's default).
    host = (
        VirtHost(on.name, on.node_uuid, view.providers.get(on.group_uuid) or "", on.address)
        if on is not None
        else None
    )
    return VmShape(
        slot=slot.key,
        vcpus=slot.cpu,
        ram_mib=slot.ram_mib,
        disk_gb=slot.disk_gib,
        variables=dict(slot.attributes),
        template=view.templates.get(slot.group_uuid),
        host=host,
    )
