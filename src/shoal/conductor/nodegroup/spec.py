"""What the driver is asked to make for one node: the machine spec, from the group's
spec and its cluster's attributes (one fallback chain for image and flavor,
`merge.image_and_flavor`), with the node's bootstrap data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from shoal.conductor.nodegroup import hosted, kube
from shoal.conductor.nodegroup.state import Pass
from shoal.domain import bootstrap, merge, provider_options
from shoal.domain.bootstrap import ClusterSecrets
from shoal.domain.model import ROLE_MASTER, Node, NodeState
from shoal.drivers.contract import Driver, MachineSpec, PlacementGroup, PlacementPolicy


def machine_spec(
    p: Pass,
    node: Node,
    api_url: str,
    token: Callable[[str], str] | None = None,
    driver: Driver | None = None,
    kube_secrets: Callable[[str], ClusterSecrets] | None = None,
) -> MachineSpec:
    """The spec of `node`'s machine (its uuid is the machine id). Its user data is the
    node's Kubernetes bootstrap where `kube.user_data` renders one (given `driver` and
    the clusters' secrets), else its identity and the node agent."""
    g, a = p.snap.group, p.snap.cluster_attrs
    spec = g.spec
    image, flavor = merge.image_and_flavor(spec, a)
    identity = bootstrap.NodeIdentity(
        node.uuid, node.name, g.cluster_id, g.uuid, g.project_id, spec.role
    )
    network = a.get("fixed_network")
    agent_token = token(node.uuid) if token and node.name else None
    user_data = None
    if driver is not None:
        user_data = kube.user_data(p, node, identity, driver, kube_secrets, api_url, agent_token)
    if user_data is None and node.name:
        user_data = bootstrap.user_data(identity, api_url, agent_token)
    docker_volume, boot_volume = merge.volumes(spec, a)
    return MachineSpec(
        machine_id=node.uuid,
        name=node.name,
        project_id=g.project_id,
        cluster_id=g.cluster_id,
        nodegroup_id=g.uuid,
        role=spec.role,
        flavor_id=flavor,
        image_id=image,
        availability_zone=node.availability_zone,
        docker_volume_size=docker_volume,
        labels=dict(spec.node_labels),
        user_data=user_data,
        keypair=a.get("keypair"),
        networks=spec.networks or ((str(network),) if network else ()),
        security_groups=spec.security_groups,
        placement_group=placement_group(p),
        boot_volume_size=boot_volume,
        options=options(p),
        vm=hosted.shape(p, node),
    )


def flavor_of(p: Pass) -> str | None:
    """The flavor the group's new machines get (its own, else its cluster's)."""
    return merge.image_and_flavor(p.snap.group.spec, p.snap.cluster_attrs)[1]


def options(p: Pass) -> dict[str, str]:
    """The group's provider options: its own, over the labels its provider's driver
    reads as options (a cluster template's label reaches the group with its labels)."""
    spec = p.snap.group.spec
    return provider_options.effective(spec.provider_options, spec.labels, p.option_labels)


def placement_group(p: Pass) -> PlacementGroup | None:
    """One placement group per node group: its machines kept apart (masters always,
    workers when possible) unless the group asks otherwise ("none": no group)."""
    g = p.snap.group
    policy = g.spec.placement_policy
    if policy == "none":
        return None
    if policy is None:
        master = g.spec.role == ROLE_MASTER
        policy = PlacementPolicy.ANTI_AFFINITY if master else PlacementPolicy.SOFT_ANTI_AFFINITY
    return PlacementGroup(f"shoal-{g.uuid}", PlacementPolicy(policy))


def probe(p: Pass) -> MachineSpec:
    """The spec any new node of the group would get (no zone, no bootstrap data): for
    validation and for the image and flavor recorded on new node rows."""
    g = p.snap.group
    node = Node(0, "", "", g.cluster_id, g.uuid, g.project_id, NodeState.PENDING)
    return machine_spec(p, node, "")


def validate(p: Pass, problems_of: Callable[[MachineSpec], list[str]]) -> list[str]:
    """Cheap checks of the group's spec (the driver's `validate`: no remote I/O)."""
    spec = probe(p)
    # A VM of a virt host is sized by its slot, not a flavor.
    problems = [] if spec.flavor_id or p.virt is not None else ["the node group has no flavor_id"]
    if not spec.image_id:
        problems.append("the node group has no image_id")
    problems += problems_of(spec) if not problems else []
    for az in p.zones:
        problems += problems_of(replace(spec, availability_zone=az))
    return sorted(set(problems))
