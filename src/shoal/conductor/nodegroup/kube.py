"""A node's Kubernetes bootstrap data (docs/kubernetes.md), rendered where it can be:
a cluster whose coe is kubernetes, on a provider that says the cluster's API address
before its first master exists (`contract.AddressReservingDriver`: the local driver), when the
conductor has the clusters' secrets. Elsewhere nodes get their identity and the node
agent only (`bootstrap.user_data`), as before.

Several masters need a provider whose API address is a load balancer of its own
(`contract.ApiLoadBalancingDriver`: the local driver): every master's address is
reserved before it is made, so each master's etcd and API server know all of them.
Elsewhere a cluster has one master, whose address is the API address, and a master
group of more than one node is refused at render (`NotRenderable`)."""

from __future__ import annotations

from collections.abc import Callable

from shoal.conductor.nodegroup.state import Pass
from shoal.domain import bootstrap
from shoal.domain.bootstrap import ClusterSecrets, versions
from shoal.domain.bootstrap.kubernetes import NotRenderable
from shoal.domain.model import ROLE_MASTER, Node, NodeState
from shoal.drivers.contract import Driver

POD_SUBNETS = 256  # a /24 each in the cluster's /16 pod range


def wanted_version(p: Pass) -> str | None:
    """The group's Kubernetes version: its own coe_version, else the cluster's
    coe_version, else its label kube_tag."""
    attrs = p.snap.cluster_attrs
    labels = attrs.get("labels") or {}
    tag = labels.get("kube_tag") if isinstance(labels, dict) else None
    return p.snap.group.spec.coe_version or attrs.get("coe_version") or tag


def user_data(
    p: Pass,
    node: Node,
    identity: bootstrap.NodeIdentity,
    driver: Driver,
    secrets: Callable[[str], ClusterSecrets] | None,
    shoal_url: str,
    agent_token: str | None,
) -> str | None:
    """`node`'s Kubernetes user data, or None where only the identity is rendered."""
    attrs = p.snap.cluster_attrs
    if secrets is None or not node.name or attrs.get("coe", "kubernetes") != "kubernetes":
        return None
    # (a method lookup, not isinstance on the Protocol: this runs for every node made)
    reserve = getattr(driver, "reserve_address", None)
    if reserve is None:
        return None
    g = p.snap.group
    version = versions.resolve(wanted_version(p), "coe_version")
    api = str(reserve(g.cluster_id))
    masters: tuple[bootstrap.Master, ...] = ()
    address = None
    etcd_exists = False
    if g.spec.role == ROLE_MASTER:
        masters, etcd_exists = master_plan(p, node, driver, api)
        address = next(m.address for m in masters if m.name == node.name)
    kube_node = bootstrap.KubeNode(
        identity,
        node.id % POD_SUBNETS,
        address,
        dict(g.spec.node_labels),
        tuple(g.spec.node_taints),
    )
    return bootstrap.render(
        kube_node,
        bootstrap.ClusterPlan(g.cluster_id, api, masters, etcd_exists=etcd_exists),
        secrets(g.cluster_id),
        version,
        shoal_url=shoal_url,
        agent_token=agent_token,
        now=p.now,
    )


def master_plan(
    p: Pass, node: Node, driver: Driver, api: str
) -> tuple[tuple[bootstrap.Master, ...], bool]:
    """The group's masters as `node`'s bootstrap sees them, oldest first (the first
    runs the cluster's one-shot steps and, in a new cluster, starts etcd), each with
    its address, and whether the cluster's etcd exists already: another master was up
    before this node was decided on (a master added or replacing a lost one joins)."""
    live = sorted(
        (n for n in p.nodes.values() if n.name and n.state is not NodeState.DELETING),
        key=lambda n: n.id,
    )
    if all(n.uuid != node.uuid for n in live):
        live = sorted([*live, node], key=lambda n: n.id)
    decided = node.created_at or p.now
    exists = any(
        n.uuid != node.uuid and n.ready_at is not None and n.ready_at < decided for n in live
    )
    reserve_machine = getattr(driver, "reserve_machine_address", None)
    if reserve_machine is None:
        if len(live) > 1 or p.snap.group.spec.node_count > 1:
            raise NotRenderable(
                "a cluster with more than one master needs an API address that survives the "
                f"loss of one, and provider {getattr(driver, 'name', '?')} has no load "
                "balancer for it (feature api-load-balancer): use one master, or a provider "
                "that has one (local)"
            )
        return (bootstrap.Master(node.name, api),), exists
    masters = tuple(
        bootstrap.Master(n.name, n.address or str(reserve_machine(n.uuid))) for n in live
    )
    return masters, exists
