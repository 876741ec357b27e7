"""Observe: fold the group's listing (one driver call) into its node rows: states,
addresses and zones as they come, lost and failed machines, orphans."""

from __future__ import annotations

from typing import Any

from shoal.conductor.nodegroup.state import Pass
from shoal.domain.model import Node, NodeState
from shoal.drivers.contract import Machine, MachineState


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
        fold(p, node, m)
    owned = set(p.nodes)
    for mid, m in p.machines.items():
        if mid not in owned and m.state is not MachineState.DELETING:
            p.to_delete.append(m.machine_id)  # tagged for this group, no row: an orphan


def fold(p: Pass, node: Node, m: Machine) -> None:
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
