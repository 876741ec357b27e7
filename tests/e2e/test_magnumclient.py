"""The real python-magnumclient (api_version="latest") against the real server:
templates, clusters, node groups, resize with nodes_to_remove, upgrade."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from magnumclient import client as magnum
from magnumclient import exceptions as mexc

from tests.integration.api_support import api_server, marked, seed_nodes
from tests.support.server import LiveServer


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    with api_server(request.param, tmp_path) as srv:
        yield srv


def test_magnumclient_full_lifecycle(server: LiveServer) -> None:
    mc = magnum.Client(
        "1", endpoint_override=server.v1, auth_token=server.token(), api_version="latest"
    )

    ct = mc.cluster_templates.create(
        name="k8s", coe="kubernetes", image_id="fedora-coreos-40", flavor_id="m1.medium",
        master_flavor_id="m1.large", labels={"kube_tag": "v1.20.2"}, network_driver="calico",
    )  # fmt: skip
    assert ct.uuid and ct.name == "k8s" and ct.network_driver == "calico"
    assert [t.name for t in mc.cluster_templates.list()] == ["k8s"]
    got = mc.cluster_templates.get("k8s")
    assert got.labels == {"kube_tag": "v1.20.2"} and got.master_flavor_id == "m1.large"
    upd = mc.cluster_templates.update(
        "k8s", [{"op": "replace", "path": "/labels", "value": str({"kube_tag": "1.20.2"})}]
    )
    assert upd.labels == {"kube_tag": "1.20.2"}
    new = mc.cluster_templates.create(name="k8s-new", coe="kubernetes", image_id="fedora-coreos-41")

    created = mc.clusters.create(
        name="c1", cluster_template_id="k8s", master_count=1, node_count=3, keypair="kp"
    )
    uid = created.uuid
    c = mc.clusters.get("c1")
    assert c.uuid == uid and c.node_count == 3 and c.master_count == 1
    assert c.status == "CREATE_IN_PROGRESS" and c.flavor_id == "m1.medium"
    assert c.keypair == "kp" and c.labels == {"kube_tag": "1.20.2"}
    assert [x.name for x in mc.clusters.list()] == ["c1"]
    mc.clusters.update(uid, [{"op": "replace", "path": "/node_count", "value": 4}])
    assert mc.clusters.get(uid).node_count == 4

    ng = mc.nodegroups.create(
        uid, name="gpu", flavor_id="g1.large", node_count=2, role="gpu", max_node_count=5,
        node_labels={"accel": "nvidia"},
        node_taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
    )  # fmt: skip
    assert ng.name == "gpu" and ng.node_count == 2
    names = {g.name for g in mc.nodegroups.list(uid)}
    assert names == {"default-master", "default-worker", "gpu"}
    assert [g.name for g in mc.nodegroups.list(uid, role="master")] == ["default-master"]
    shown = mc.nodegroups.get(uid, "gpu")
    assert shown.max_node_count == 5 and shown.node_labels == {"accel": "nvidia"}
    assert shown.node_taints == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    ng2 = mc.nodegroups.update(
        uid, "gpu", [{"op": "replace", "path": "/min_node_count", "value": 1}]
    )
    assert ng2.min_node_count == 1
    assert mc.clusters.get(uid).node_count == 6

    nodes = seed_nodes(server, shown.uuid, 2)
    mc.clusters.resize(uid, 1, nodes_to_remove=[nodes[0]["uuid"]], nodegroup="gpu")
    assert mc.nodegroups.get(uid, "gpu").node_count == 1
    assert marked(server, shown.uuid) == {nodes[0]["uuid"]}
    mc.clusters.upgrade(uid, "k8s-new", max_batch_size=1, nodegroup="gpu")
    assert mc.nodegroups.get(uid, "gpu").image_id == "fedora-coreos-41"

    with pytest.raises(mexc.BadRequest):
        mc.nodegroups.delete(uid, "default-worker")
    with pytest.raises(mexc.NotFound):
        mc.clusters.get("nope")
    with pytest.raises(mexc.Conflict):
        mc.clusters.resize(uid, 9, nodegroup="gpu")
    mc.nodegroups.delete(uid, "gpu")
    assert mc.nodegroups.get(uid, "gpu").status == "DELETE_IN_PROGRESS"
    mc.clusters.delete(uid)
    assert mc.clusters.get(uid).status == "DELETE_IN_PROGRESS"
    mc.cluster_templates.delete("k8s")
    assert [t.name for t in mc.cluster_templates.list()] == ["k8s-new"]
    assert mc.clusters.get(uid).cluster_template_id == new.uuid  # set by the upgrade
    assert ct.uuid != new.uuid


def test_magnumclient_without_version_header(server: LiveServer) -> None:
    """magnumclient built without api_version sends no header: 1.1 semantics apply."""
    mc = magnum.Client(
        "1", endpoint_override=server.v1, auth_token=server.token(), api_version=None
    )
    mc.cluster_templates.create(name="t", coe="kubernetes", image_id="fedora-coreos-40")
    uid = mc.clusters.create(name="old", cluster_template_id="t", node_count=1).uuid
    c = mc.clusters.get(uid)
    assert c.stack_id == uid and c._info["cluster_id"] == uid  # the client copies stack_id
    assert c.node_count == 1
    with pytest.raises(mexc.HttpError):
        mc.nodegroups.list(uid)
