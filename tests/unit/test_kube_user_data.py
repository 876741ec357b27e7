"""Which nodes get the Kubernetes bootstrap (conductor/nodegroup/kube.py), on plain
values: a snapshot, a driver that can or cannot reserve an API address, a cluster's
secrets. And the rules of the local driver's address leases and of the derived
service-account key."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from shoal.conductor.nodegroup import kube, spec
from shoal.conductor.nodegroup.state import Pass
from shoal.db.snapshots import GroupSnapshot
from shoal.domain import model as m
from shoal.domain import node_programs, pki
from shoal.domain.bootstrap import ClusterSecrets
from shoal.domain.bootstrap.kubernetes import NotRenderable
from shoal.domain.errors import Invalid
from shoal.domain.sealing import Sealer
from shoal.drivers.contract import BlockedError
from shoal.drivers.local.addresses import Leases

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
SEALER = Sealer("k" * 44)
CA = pki.new_ca("c-1", T0 - timedelta(days=1))


def secrets(cluster: str) -> ClusterSecrets:
    return ClusterSecrets(CA, SEALER.service_account_key(cluster), SEALER.bootstrap_token(cluster))


class Reserving:
    """A driver that holds one API address per cluster (the capability kube.py uses)."""

    name = "reserving"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def reserve_address(self, cluster_id: str) -> str:
        self.asked.append(cluster_id)
        return "10.9.0.2"


class Plain:
    name = "plain"


class Balancing(Reserving):
    """A driver whose API address is a load balancer and that reserves each machine's
    address before it is made (`contract.ApiLoadBalancingDriver`)."""

    name = "balancing"

    def __init__(self) -> None:
        super().__init__()
        self.machines: dict[str, str] = {}

    def reserve_machine_address(self, machine_id: str) -> str:
        return self.machines.setdefault(machine_id, f"10.9.0.{10 + len(self.machines)}")


def snapshot(
    role: str = "worker", count: int = 1, nodes: tuple[m.Node, ...] = (), **attrs: Any
) -> Pass:
    s = m.NodeGroupSpec(role=role, flavor_id="local", image_id="host", node_count=count)
    g = m.NodeGroup(1, "g-1", "c-1", "p-1", role, False, s)
    snap = GroupSnapshot(
        group=g,
        cluster_name="c",
        cluster_attrs={"labels": {"kube_tag": "v1.20.2"}, **attrs},
        cluster_deleting=False,
        operation_started_at=None,
        nodes=list(nodes),
    )
    return Pass.start(snap, T0, [], "local")


def node(i: int = 1) -> m.Node:
    return m.Node(i, f"n-{i}", f"c-{i}", "c-1", "g-1", "p-1", m.NodeState.PENDING)


def files(user_data: str) -> dict[str, str]:
    doc = json.loads(user_data.removeprefix("#cloud-config\n"))
    return {f["path"]: f["content"] for f in doc["write_files"]}


def test_a_worker_on_a_reserving_provider_gets_kubernetes() -> None:
    driver = Reserving()
    got = spec.machine_spec(snapshot(), node(), "http://10.9.0.1:9511", None, driver, secrets)
    assert got.user_data is not None
    written = files(got.user_data)
    assert "https://10.9.0.2:6443" in written["/etc/kubernetes/bootstrap-kubelet.conf"]
    assert written["/etc/kubernetes/pki/ca.crt"] == CA.cert_pem
    assert driver.asked == ["c-1"]


def test_the_master_gets_the_api_address_as_its_own() -> None:
    got = spec.machine_spec(snapshot("master"), node(), "u", None, Reserving(), secrets)
    assert got.user_data is not None
    manifest = json.loads(files(got.user_data)["/etc/shoal/services.json"])
    apiserver = next(s for s in manifest["services"] if s["name"] == "kube-apiserver")
    assert "--advertise-address=10.9.0.2" in apiserver["argv"]
    assert files(got.user_data)["/etc/kubernetes/pki/sa.key"] == SEALER.service_account_key("c-1")


@pytest.mark.parametrize(
    ("driver", "have_secrets", "attrs", "why"),
    [
        (Plain(), True, {}, "the provider cannot reserve an API address"),
        (Reserving(), False, {}, "no secrets: a process without the clusters' keys"),
        (Reserving(), True, {"coe": "swarm"}, "not a kubernetes cluster"),
        (None, True, {}, "no driver given (validation's probe spec)"),
    ],
)
def test_where_only_the_identity_is_rendered(
    driver: Any, have_secrets: bool, attrs: dict[str, Any], why: str
) -> None:
    got = spec.machine_spec(
        snapshot(**attrs), node(), "u", None, driver, secrets if have_secrets else None
    )
    assert got.user_data is not None, why
    assert "/etc/kubernetes/pki/ca.crt" not in files(got.user_data), why
    assert "/etc/shoal/node.json" in files(got.user_data)


def manifest_of(user_data: str | None) -> dict[str, list[str]]:
    assert user_data is not None
    doc = json.loads(files(user_data)["/etc/shoal/services.json"])
    return {s["name"]: s["argv"] for s in doc["services"]}


def master(i: int, **kw: Any) -> m.Node:
    return dataclasses.replace(node(i), name=f"demo-master-{i}", uuid=f"u-{i}", **kw)


def test_three_masters_behind_a_balancer_each_know_all_and_the_first_starts_etcd() -> None:
    driver = Balancing()
    three = tuple(master(i) for i in (1, 2, 3))
    p = snapshot("master", count=3, nodes=three)
    got = {n.name: manifest_of(spec.machine_spec(p, n, "u", None, driver, secrets).user_data)
           for n in three}  # fmt: skip
    assert driver.machines == {"u-1": "10.9.0.10", "u-2": "10.9.0.11", "u-3": "10.9.0.12"}
    first, second = got["demo-master-1"], got["demo-master-2"]
    assert "--initial-cluster=demo-master-1=https://10.9.0.10:2380" in first["etcd"]
    assert second["etcd"][:2] == ["shoal-agent", "etcd-join"]
    assert "--endpoints=https://10.9.0.10:2379,https://10.9.0.12:2379" in second["etcd"]
    assert "--advertise-address=10.9.0.11" in second["kube-apiserver"]
    assert (
        "--etcd-servers=https://10.9.0.11:2379,https://10.9.0.10:2379,https://10.9.0.12:2379"
        in second["kube-apiserver"]
    )
    assert "cluster-bootstrap" in got["demo-master-1"]
    assert "cluster-bootstrap" not in second


def test_a_master_replacing_a_lost_one_joins_the_etcd_of_those_left() -> None:
    driver = Balancing()
    up = T0 - timedelta(minutes=30)
    old = (
        master(1, state=m.NodeState.DELETING, address="10.9.0.10"),
        master(2, state=m.NodeState.ACTIVE, address="10.9.0.11", ready_at=up),
        master(3, state=m.NodeState.ACTIVE, address="10.9.0.12", ready_at=up),
    )
    new = master(4, created_at=T0 - timedelta(minutes=1))
    driver.machines = {n.uuid: str(n.address) for n in old}  # held since they were made
    p = snapshot("master", count=3, nodes=(*old, new))
    got = manifest_of(spec.machine_spec(p, new, "u", None, driver, secrets).user_data)
    assert got["etcd"][:2] == ["shoal-agent", "etcd-join"]  # etcd exists: it joins
    assert (
        "--masters=demo-master-2=https://10.9.0.11:2380,demo-master-3=https://10.9.0.12:2380,"
        "demo-master-4=https://10.9.0.13:2380"
    ) in got["etcd"]
    assert driver.machines["u-4"] == "10.9.0.13"


def test_masters_made_together_do_not_count_as_an_existing_etcd() -> None:
    """A first master retried after the others came up still starts etcd: they were
    decided on together, so none of them was up before it."""
    made = T0 - timedelta(minutes=5)
    first = master(1, created_at=made)
    others = tuple(
        master(i, created_at=made, state=m.NodeState.ACTIVE, ready_at=made + timedelta(minutes=1))
        for i in (2, 3)
    )
    p = snapshot("master", count=3, nodes=(first, *others))
    got = manifest_of(spec.machine_spec(p, first, "u", None, Balancing(), secrets).user_data)
    assert got["etcd"][0] == "etcd" and "--initial-cluster-state=new" in got["etcd"]


def test_more_than_one_master_is_refused_with_the_reason() -> None:
    with pytest.raises(NotRenderable, match="use one master"):
        spec.machine_spec(snapshot("master", count=3), node(), "u", None, Reserving(), secrets)


def test_an_unsupported_version_is_refused() -> None:
    p = snapshot(labels={"kube_tag": "v1.31.0"})
    with pytest.raises(Invalid, match="supported: v1.20.2"):
        spec.machine_spec(p, node(), "u", None, Reserving(), secrets)


@pytest.mark.parametrize(
    ("group_version", "attrs", "want"),
    [
        (None, {"labels": {"kube_tag": "v1.20.2"}}, "v1.20.2"),
        (None, {"coe_version": "1.20.2", "labels": {"kube_tag": "x"}}, "1.20.2"),
        ("v1.20.2", {"coe_version": "other"}, "v1.20.2"),
        (None, {"labels": {}}, None),
    ],
)
def test_the_version_is_the_groups_then_the_clusters_then_kube_tag(
    group_version: str | None, attrs: dict[str, Any], want: str | None
) -> None:
    p = snapshot()
    g = dataclasses.replace(
        p.snap.group, spec=dataclasses.replace(p.snap.group.spec, coe_version=group_version)
    )
    p = dataclasses.replace(p, snap=dataclasses.replace(p.snap, group=g, cluster_attrs=attrs))
    assert kube.wanted_version(p) == want


def test_the_service_account_key_is_derived_per_cluster() -> None:
    a, b = SEALER.service_account_key("c-1"), SEALER.service_account_key("c-2")
    assert a == SEALER.service_account_key("c-1") and a != b
    assert Sealer("k" * 44).service_account_key("c-1") == a  # from the key alone
    assert Sealer("j" * 44).service_account_key("c-1") != a
    key = serialization.load_pem_private_key(a.encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"


def test_leases_lowest_free_first_and_never_shared(tmp_path: Path) -> None:
    leases = Leases(tmp_path, "10.7.0.0/29")  # hosts .1-.6; the host has .1
    assert leases.gateway == "10.7.0.1"
    assert [leases.take(f"m{i}") for i in range(3)] == ["10.7.0.2", "10.7.0.3", "10.7.0.4"]
    assert leases.take("m1") == "10.7.0.3"  # held: the same
    leases.release("m1")
    assert leases.take("m9") == "10.7.0.3"  # free again once released


def test_a_clusters_api_address_is_its_own_and_no_machine_takes_it(tmp_path: Path) -> None:
    leases = Leases(tmp_path, "10.7.0.0/29")
    assert leases.reserve("c") == "10.7.0.2" == leases.reserve("c")
    assert leases.take("w1") == "10.7.0.3"
    assert leases.take("m1") == "10.7.0.4"  # a master too: its own
    leases.release("m1")
    assert leases.held()["10.7.0.2"] == "cluster:c"
    leases.release_cluster("c")
    assert leases.take("m2") == "10.7.0.2"  # free once the cluster is released


def test_no_free_address_blocks(tmp_path: Path) -> None:
    leases = Leases(tmp_path, "10.7.0.0/30")  # hosts .1 and .2: one for machines
    leases.take("m1")
    with pytest.raises(BlockedError, match="no free address"):
        leases.take("m2")


@pytest.mark.parametrize(
    ("services", "names"),
    [
        ([{"name": "kubelet", "state": "missing"}], "kubelet"),
        ([{"name": "etcd", "state": "missing"}, {"name": "kubelet", "state": "missing"},
          {"name": "containerd", "state": "running"}], "etcd, kubelet"),
        ([{"name": "kubelet", "state": "running"}], None),
        ([{"name": "kubelet", "state": "waiting"}], None),
        (None, None),
        ("missing", None),
        ([{"state": "missing"}, "x", 3], None),
    ],
)  # fmt: skip
def test_what_an_agent_reports_missing_becomes_the_nodes_reason(
    services: Any, names: str | None
) -> None:
    reason = node_programs.missing_reason(services)
    if names is None:
        assert reason is None
    else:
        assert reason is not None and node_programs.is_missing_reason(reason)
        assert reason.startswith(f"the node's image lacks {names} (not on its PATH)")
