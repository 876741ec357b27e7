"""Kubernetes feeds the conductor (conductor/nodegroup/kubefeed.py), stepped with the
real database, the real sim cloud and the real conductor, against a Kubernetes API
server that behaves (tests/support/fake_kube.py) reached through `KubeAccess` and
the real `shoal.kube` client: Node readiness joins health and the repair ladder, an
unreachable API server is a fact of its own cluster, the group's labels and taints
reach the Nodes, and a removed node is drained before its machine goes, its Node
deleted after."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from shoal.conductor.kubeapi import KubeAccess
from shoal.db.types import utcnow
from shoal.domain import conditions as cond
from shoal.domain import kubenodes, pki
from shoal.domain import model as m
from shoal.domain.bootstrap import ClusterSecrets
from shoal.drivers.contract import Feature
from shoal.services import nodegroups
from tests.integration.conductor_support import FAST_CONDUCTOR, Env, make_env
from tests.support.fake_kube import FakeKube

MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKERS = {"name": "w", "role": "worker", "flavor_id": "m1.small", "node_count": 2,
           "node_labels": {"disk": "ssd", "not valid": "x"},
           "node_taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
           "health_policy": {"unhealthy_timeout_s": 30}}  # fmt: skip
SETTINGS = replace(FAST_CONDUCTOR, kube_check_seconds=0.5, drain_timeout_seconds=60)


@pytest.fixture
def kenv(tmp_path: Path) -> Iterator[tuple[Env, dict[str, FakeKube]]]:
    """An Env whose sim provider counts as running shoal's Kubernetes, each cluster's
    API server a FakeKube (by API address)."""
    fakes: dict[str, FakeKube] = {}
    cas: dict[str, pki.CA] = {}

    def secrets(cluster: str) -> ClusterSecrets:
        ca = cas.setdefault(cluster, pki.new_ca(cluster, utcnow()))
        return ClusterSecrets(ca, "", "")

    for env in make_env(f"sqlite:///{tmp_path / 'shoal.db'}", SETTINGS):
        ctx = env.conductor.ctx
        ctx.providers["sim"].kubernetes = True
        ctx.kube = KubeAccess(
            secrets, ctx.now, 1.0, transport=lambda s: fakes.setdefault(s, FakeKube()).transport(s)
        )
        yield env, fakes


def _made(env: Env, fakes: dict[str, FakeKube], name: str) -> tuple[str, FakeKube]:
    cid = env.create(name, [MASTER, WORKERS])
    env.step_until(env.complete(cid))
    c = env.cluster(cid)
    assert c is not None and c.api_address
    fake = fakes.setdefault(c.api_address, FakeKube())
    for n in env.nodes(cid):  # the kubelets join
        fake.register(n.name)
    return cid, fake


def _labelled(fake: FakeKube, name: str) -> bool:
    n = fake.nodes.get(name)
    return n is not None and kubenodes.GROUP_LABEL in n["metadata"]["labels"]


def test_labels_and_taints_reach_the_nodes_and_are_kept(
    kenv: tuple[Env, dict[str, FakeKube]],
) -> None:
    env, fakes = kenv
    cid, fake = _made(env, fakes, "labels")
    names = {n.name: n for n in env.nodes(cid)}
    env.step_until(lambda: all(_labelled(fake, x) for x in names))
    group = env.group(cid, "w")
    for name, node in names.items():
        meta = fake.nodes[name]["metadata"]
        assert meta["labels"][kubenodes.GROUP_LABEL] == node.nodegroup_id
        if node.nodegroup_id == group.uuid:
            assert meta["labels"]["disk"] == "ssd" and "not valid" not in meta["labels"]
            assert fake.nodes[name]["spec"]["taints"] == [
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
            ]
        else:
            assert "disk" not in meta["labels"] and "taints" not in fake.nodes[name]["spec"]
    said = " | ".join(e.message for e in env.events(cid))
    assert "node_labels not valid are not valid Kubernetes labels" in said
    # Someone changes a label shoal keeps: it is set back. A label shoal did not set stays.
    worker = next(n for n, v in names.items() if v.nodegroup_id == group.uuid)
    fake.nodes[worker]["metadata"]["labels"].update(disk="hdd", team="a")
    env.step_until(lambda: fake.nodes[worker]["metadata"]["labels"]["disk"] == "ssd")
    assert fake.nodes[worker]["metadata"]["labels"]["team"] == "a"
    # A label and the taint removed from the group go from the Nodes.
    nodegroups.update(
        env.db, replace(env.caller, version=(1, 14)), cid, "w",
        [{"op": "replace", "path": "/node_labels", "value": {"zone": "b"}},
         {"op": "replace", "path": "/node_taints", "value": []}],
    )  # fmt: skip

    def moved() -> bool:
        meta = fake.nodes[worker]["metadata"]
        return "disk" not in meta["labels"] and meta["labels"].get("zone") == "b"

    env.step_until(moved)
    assert fake.nodes[worker]["spec"]["taints"] == []


def test_not_ready_is_unhealthy_in_health_status_and_repaired(
    kenv: tuple[Env, dict[str, FakeKube]],
) -> None:
    env, fakes = kenv
    cid, fake = _made(env, fakes, "ready")
    group = env.group(cid, "w")
    sick = next(n for n in env.nodes(cid, "w"))
    fake.set_ready(
        sick.name, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
    )
    env.step_until(lambda: _labelled(fake, sick.name))
    # Within the unhealthy timeout: nothing yet.
    env.conductor.run_once()
    assert cond.is_true(env.group(cid, "w").conditions, cond.HEALTHY)
    env.skew[0] += timedelta(seconds=31)

    def unhealthy() -> bool:
        c = env.cluster(cid)
        return c is not None and c.health_status == "UNHEALTHY"

    env.step_until(unhealthy)
    c = env.cluster(cid)
    assert c is not None
    assert sick.name in c.health_status_reason["w"]
    assert "Kubernetes reports it Ready=Unknown since" in c.health_status_reason["w"]
    assert "Kubelet stopped posting node status." in c.health_status_reason["w"]

    # The ladder: the sim reboots it first; the kubelet is back after the reboot.
    env.step_until(lambda: any(e.reason == "Repairing" for e in env.events(cid)))
    fake.set_ready(sick.name, "True", "KubeletReady", "kubelet is posting ready status")

    def healthy() -> bool:
        c = env.cluster(cid)
        return c is not None and c.health_status == "HEALTHY"

    env.step_until(healthy)
    assert any(e.reason == "Repaired" for e in env.events(cid))
    assert group.uuid


def test_unreachable_api_server_is_a_fact_of_its_own_cluster(
    kenv: tuple[Env, dict[str, FakeKube]],
) -> None:
    env, fakes = kenv
    cid, fake = _made(env, fakes, "down")
    other, other_fake = _made(env, fakes, "up")
    fake.reachable = False

    def said() -> bool:
        c = env.cluster(cid)
        return c is not None and "API server unreachable" in c.health_status_reason.get("api", "")

    env.step_until(said)
    c = env.cluster(cid)
    assert c is not None and c.health_status == "UNHEALTHY" and c.status.endswith("COMPLETE")
    assert "Connection refused" in c.health_status_reason["api"]

    def both() -> bool:
        ks = [cond.get(env.group(cid, g).conditions, cond.KUBERNETES_API) for g in ("m", "w")]
        return all(k is not None and k.status == cond.FALSE for k in ks)

    env.step_until(both)  # each group's pass says it
    k = cond.get(env.group(cid, "w").conditions, cond.KUBERNETES_API)
    assert k is not None and k.reason == cond.API_UNREACHABLE
    assert k.message.startswith("API server unreachable: ConnectError: ")
    assert not cond.get(env.group(cid, "w").conditions, cond.RECONCILE_ERROR)
    # The other cluster goes on: its Nodes are labelled, it is healthy.
    env.step_until(lambda: all(_labelled(other_fake, n.name) for n in env.nodes(other)))
    o = env.cluster(other)
    assert o is not None and o.health_status == "HEALTHY"
    # Back: the fact goes.
    fake.reachable = True
    env.step_until(lambda: (c := env.cluster(cid)) is not None and c.health_status == "HEALTHY")


def test_a_removed_node_is_drained_then_its_node_object_deleted(
    kenv: tuple[Env, dict[str, FakeKube]],
) -> None:
    env, fakes = kenv
    cid, fake = _made(env, fakes, "drain")
    gone, kept = env.nodes(cid, "w")
    env.step_until(lambda: _labelled(fake, gone.name))
    fake.add_pod("default", "web", gone.name)
    fake.add_pod("kube-system", "proxy", gone.name, owner="DaemonSet")
    env.resize(cid, "w", 1, remove=[gone.uuid])
    env.step_until(lambda: any(e.reason == "Draining" for e in env.events(cid)))
    node = fake.nodes[gone.name]
    assert node["spec"]["unschedulable"] is True
    assert gone.uuid in env.servers(cid)  # the machine waits for the drain

    def done() -> bool:
        c = env.cluster(cid)
        return c is not None and c.status == "UPDATE_COMPLETE" and gone.name not in fake.nodes

    env.step_until(done)
    assert "default/web" not in fake.pods and "kube-system/proxy" in fake.pods
    assert gone.uuid not in env.servers(cid) and kept.uuid in env.servers(cid)
    reasons = [e.reason for e in env.events(cid)]
    assert reasons.index("Draining") < reasons.index("Drained") < reasons.index("NodeObjectDeleted")
    assert kept.name in fake.nodes
    assert m.NodeState.ACTIVE in {n.state for n in env.nodes(cid, "w")}


def test_a_node_replaced_for_kubernetes_keeps_the_cluster_unhealthy_until_its_successor_is_ready(
    kenv: tuple[Env, dict[str, FakeKube]],
) -> None:
    env, fakes = kenv
    driver = env.conductor.ctx.providers["sim"].driver
    driver.features = driver.features - {Feature.REBOOT, Feature.REBUILD}  # type: ignore[attr-defined]
    cid, fake = _made(env, fakes, "replace")
    sick, other = env.nodes(cid, "w")
    env.step_until(lambda: _labelled(fake, sick.name))
    fake.set_ready(sick.name, "False", "KubeletNotReady", "PLEG is not healthy")
    env.skew[0] += timedelta(seconds=31)
    env.step_until(lambda: sick.uuid not in env.servers(cid) and sick.name not in fake.nodes)
    successor = next(n for n in env.nodes(cid, "w") if n.uuid not in (sick.uuid, other.uuid))
    env.step_until(env.complete(cid))
    for _ in range(5):  # complete, but its successor's Node is not Ready yet: unhealthy
        env.conductor.run_once()
    c = env.cluster(cid)
    assert c is not None and c.health_status == "UNHEALTHY", c
    assert "Kubernetes reports it NotReady since" in c.health_status_reason["w"]
    assert "replaced, its successor is not ready yet" in c.health_status_reason["w"]
    fake.register(successor.name)
    env.step_until(lambda: (c := env.cluster(cid)) is not None and c.health_status == "HEALTHY")
    reasons = [e.reason for e in env.events(cid)]
    assert "Repairing" in reasons and "NodeObjectDeleted" in reasons


def test_the_only_master_not_ready_is_reported_never_replaced(
    kenv: tuple[Env, dict[str, FakeKube]],
) -> None:
    env, fakes = kenv
    driver = env.conductor.ctx.providers["sim"].driver
    driver.features = driver.features - {Feature.REBOOT, Feature.REBUILD}  # type: ignore[attr-defined]
    cid, fake = _made(env, fakes, "master")
    (master,) = env.nodes(cid, "m")
    env.step_until(lambda: _labelled(fake, master.name))
    fake.set_ready(master.name, "False", "KubeletNotReady", "container runtime is down")
    env.skew[0] += timedelta(seconds=400)  # past the master group's unhealthy timeout (300 s)

    def unhealthy() -> bool:
        c = env.cluster(cid)
        return c is not None and c.health_status == "UNHEALTHY"

    env.step_until(unhealthy)
    for _ in range(5):
        env.conductor.run_once()
    c = env.cluster(cid)
    assert (
        c is not None
        and "not repaired: it is the cluster's only master" in (c.health_status_reason["m"])
    )
    assert "container runtime is down" in c.health_status_reason["m"]
    assert [n.uuid for n in env.nodes(cid, "m")] == [master.uuid]
    assert master.uuid in env.servers(cid)
    assert not any(e.reason == "Repairing" for e in env.events(cid))
    fake.set_ready(master.name, "True", "KubeletReady", "kubelet is posting ready status")
    env.step_until(lambda: (c := env.cluster(cid)) is not None and c.health_status == "HEALTHY")
