"""What the driver is asked to make for one node: the machine spec, from the group's
spec and its cluster's attributes (one fallback chain, `merge.image_and_flavor`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from shoal.conductor.nodegroup.state import Pass
from shoal.domain import merge
from shoal.domain.model import Node, NodeState
from shoal.drivers.contract import MachineSpec


def machine_spec(p: Pass, node: Node) -> MachineSpec:
    """The spec of `node`'s machine (its uuid is the machine id)."""
    g, a = p.snap.group, p.snap.cluster_attrs
    image, flavor = merge.image_and_flavor(g.spec, a)
    return MachineSpec(
        machine_id=node.uuid,
        name=node.name,
        project_id=g.project_id,
        cluster_id=g.cluster_id,
        nodegroup_id=g.uuid,
        role=g.spec.role,
        flavor_id=flavor,
        image_id=image,
        availability_zone=node.availability_zone,
        docker_volume_size=g.spec.docker_volume_size or a.get("docker_volume_size"),
        labels=dict(g.spec.node_labels),
    )


def probe(p: Pass) -> MachineSpec:
    """The spec any new node of the group would get (no zone): for validation and for
    the image and flavor recorded on new node rows."""
    g = p.snap.group
    return machine_spec(p, Node(0, "", "", g.cluster_id, g.uuid, g.project_id, NodeState.PENDING))


def validate(p: Pass, problems_of: Callable[[MachineSpec], list[str]]) -> list[str]:
    """Cheap checks of the group's spec (the driver's `validate`: no remote I/O)."""
    spec = probe(p)
    problems = [] if spec.flavor_id else ["the node group has no flavor_id"]
    if not spec.image_id:
        problems.append("the node group has no image_id")
    problems += problems_of(spec) if not problems else []
    for az in p.snap.group.spec.availability_zones:
        problems += problems_of(replace(spec, availability_zone=az))
    return sorted(set(problems))
