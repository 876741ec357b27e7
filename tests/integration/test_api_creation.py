"""Creation paths through real HTTP on SQLite and PostgreSQL: attributes, template,
clone, template or clone plus overrides; sources changed or deleted afterwards;
template-from-cluster and NGT-from-node-group."""

from __future__ import annotations

import pytest

from tests.integration.api_support import Api
from tests.support.server import LiveServer


@pytest.fixture
def api(server: LiveServer) -> Api:
    return Api(server)


def test_all_attributes_in_request_makes_default_groups(api: Api) -> None:
    c = api.cluster(
        name="plain", image_id="ubuntu-24.04", flavor_id="m1.large", master_flavor_id="m1.medium",
        master_count=3, node_count=4, labels={"kube_tag": "v1.20.2"}, keypair="kp",
    )  # fmt: skip
    assert c["cluster_template_id"] is None and c["coe"] == "kubernetes"
    assert (c["master_count"], c["node_count"]) == (3, 4)
    assert c["status"] == "CREATE_IN_PROGRESS" and c["keypair"] == "kp"
    assert c["labels"] == {"kube_tag": "v1.20.2"} and c["create_timeout"] == 60
    g = api.groups(c["uuid"])
    assert set(g) == {"default-master", "default-worker"}
    assert g["default-master"]["role"] == "master" and g["default-master"]["is_default"]
    assert g["default-master"]["flavor_id"] == "m1.medium"
    assert g["default-worker"]["flavor_id"] == "m1.large"
    assert g["default-worker"]["image_id"] == "ubuntu-24.04"
    assert c["node_groups"] and {x["name"] for x in c["node_groups"]} == set(g)


def test_heterogeneous_groups_in_request(api: Api) -> None:
    c = api.cluster(
        name="het",
        image_id="fedora-coreos-40",
        node_groups=[
            {"name": "cp", "role": "master", "node_count": 3,
             "availability_zones": ["az-1", "az-2", "az-3"]},
            {"name": "gpu", "role": "gpu", "flavor_id": "g1.large", "node_count": 2,
             "node_taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
            {"name": "ssd", "flavor_id": "s1.large", "image_id": "ubuntu-24.04", "node_count": 1,
             "min_node_count": 1, "max_node_count": 5, "deletion_policy": "oldest",
             "rollout": {"max_surge": 0, "max_unavailable": 1}},
        ],
    )  # fmt: skip
    assert (c["master_count"], c["node_count"]) == (3, 3)
    g = api.groups(c["uuid"])
    assert g["cp"]["is_default"] and g["gpu"]["is_default"] and not g["ssd"]["is_default"]
    assert g["cp"]["availability_zones"] == ["az-1", "az-2", "az-3"]
    assert g["gpu"]["node_taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    assert g["ssd"]["image_id"] == "ubuntu-24.04" and g["gpu"]["image_id"] == "fedora-coreos-40"
    assert g["ssd"]["rollout"] == {"max_surge": 0, "max_unavailable": 1, "progress_deadline_s": 600}
    assert (g["ssd"]["min_node_count"], g["ssd"]["max_node_count"]) == (1, 5)
    assert g["ssd"]["deletion_policy"] == "oldest"


def test_from_template_with_embedded_ngts_then_template_changes(api: Api) -> None:
    ct = api.template(
        name="gpu-tpl",
        labels={"a": "1", "b": "2"},
        node_group_templates=[
            {"name": "masters", "role": "master", "node_count": 3, "flavor_id": "m1.medium"},
            {"name": "gpu", "role": "worker", "node_count": 2, "flavor_id": "g1.large",
             "node_labels": {"accel": "gpu"}},
        ],
    )  # fmt: skip
    assert [n["name"] for n in ct["node_group_templates"]] == ["masters", "gpu"]
    assert ct["node_group_templates"][0]["cluster_template_id"] == ct["uuid"]
    c = api.cluster(name="from-tpl", cluster_template_id="gpu-tpl", node_count=5)
    assert c["cluster_template_id"] == ct["uuid"]
    assert (c["master_count"], c["node_count"]) == (3, 5)  # request count wins for default worker
    assert c["labels"] == {"a": "1", "b": "2"}
    g = api.groups(c["uuid"])
    assert g["gpu"]["flavor_id"] == "g1.large" and g["gpu"]["node_labels"] == {"accel": "gpu"}
    assert g["gpu"]["source_id"] == ct["node_group_templates"][1]["uuid"]
    # The template changes, then goes: the cluster keeps what it copied.
    api.ok("PATCH", "/clustertemplates/gpu-tpl", json=[
        {"op": "replace", "path": "/image_id", "value": "ubuntu-22.04"},
        {"op": "replace", "path": "/labels", "value": "{'z': '9'}"},
    ])  # fmt: skip
    assert api.ok("GET", "/clustertemplates/gpu-tpl")["labels"] == {"z": "9"}
    api.ok("DELETE", "/clustertemplates/gpu-tpl", 204)
    api.ok("GET", "/clustertemplates/gpu-tpl", 404)
    again = api.ok("GET", f"/clusters/{c['uuid']}")
    assert again["image_id"] == "fedora-coreos-40" and again["labels"] == {"a": "1", "b": "2"}
    assert again["cluster_template_id"] == ct["uuid"]
    assert api.groups(c["uuid"])["gpu"]["image_id"] == "fedora-coreos-40"


def test_template_plus_overrides_and_label_merge(api: Api) -> None:
    api.template(name="base", flavor_id="m1.small", labels={"a": "1", "b": "2"})
    c = api.cluster(
        name="ovr", cluster_template_id="base", flavor_id="m1.large", master_count=3,
        labels={"b": "3", "c": "4"}, merge_labels=True,
    )  # fmt: skip
    assert c["flavor_id"] == "m1.large" and c["master_count"] == 3 and c["node_count"] == 1
    assert c["labels"] == {"a": "1", "b": "3", "c": "4"}
    assert c["labels_overridden"] == {"b": "2"} and c["labels_added"] == {"c": "4"}
    c2 = api.cluster(name="ovr2", cluster_template_id="base", labels={"c": "4"})
    assert c2["labels"] == {"c": "4"} and c2["labels_skipped"] == {"a": "1", "b": "2"}


def test_clone_then_source_changes_and_goes(api: Api) -> None:
    src = api.cluster(
        name="src", image_id="fedora-coreos-40", labels={"x": "1"},
        node_groups=[
            {"name": "m", "role": "master", "node_count": 1},
            {"name": "w", "node_count": 2, "availability_zones": ["az-2"]},
            {"name": "gpu", "role": "gpu", "flavor_id": "g1.large", "node_count": 1},
        ],
    )  # fmt: skip
    clone = api.cluster(name="dst", from_cluster="src")
    assert clone["source_id"] == src["uuid"]
    g = api.groups(clone["uuid"])
    assert {k: v["node_count"] for k, v in g.items()} == {"m": 1, "w": 2, "gpu": 1}
    assert g["w"]["availability_zones"] == ["az-2"] and g["gpu"]["flavor_id"] == "g1.large"
    over = api.cluster(name="dst2", from_cluster=src["uuid"], node_count=7, labels={"y": "2"})
    assert over["node_count"] == 7 + 1 and over["labels"] == {"y": "2"}
    api.ok("POST", "/clusters/src/actions/resize", 202, json={"node_count": 9, "nodegroup": "w"})
    api.ok("DELETE", "/clusters/src", 204)
    assert api.groups(clone["uuid"])["w"]["node_count"] == 2
    assert api.ok("GET", "/clusters/dst")["labels"] == {"x": "1"}


def test_template_from_cluster_and_cluster_from_it(api: Api) -> None:
    src = api.cluster(
        name="model", image_id="ubuntu-24.04", keypair="kp", labels={"k": "v"},
        node_groups=[
            {"name": "cp", "role": "master", "node_count": 3},
            {"name": "big", "flavor_id": "m1.large", "node_count": 4, "max_node_count": 10,
             "node_taints": ["dedicated=big:NoExecute"]},
        ],
    )  # fmt: skip
    ct = api.ok(
        "POST", "/clustertemplates", 201, json={"name": "from-model", "from_cluster": "model"}
    )
    assert ct["source_id"] == src["uuid"] and ct["image_id"] == "ubuntu-24.04"
    assert ct["keypair_id"] == "kp" and ct["labels"] == {"k": "v"}
    ngts = {n["name"]: n for n in ct["node_group_templates"]}
    assert ngts["cp"]["role"] == "master" and ngts["cp"]["node_count"] == 3
    assert ngts["big"]["max_node_count"] == 10
    assert ngts["big"]["node_taints"] == [
        {"key": "dedicated", "value": "big", "effect": "NoExecute"}
    ]
    api.ok("DELETE", "/clusters/model", 204)
    c = api.cluster(name="from-ct", cluster_template_id=ct["uuid"])
    g = api.groups(c["uuid"])
    assert {k: v["node_count"] for k, v in g.items()} == {"cp": 3, "big": 4}
    assert g["big"]["flavor_id"] == "m1.large" and c["keypair"] == "kp"


def test_ngt_standalone_and_from_nodegroup(api: Api) -> None:
    c = api.cluster(name="host", image_id="fedora-coreos-40")
    ng = api.ok("POST", f"/clusters/{c['uuid']}/nodegroups", 202, json={
        "name": "ssd", "flavor_id": "s1.large", "node_count": 2, "min_node_count": 1,
        "labels": {"disk": "ssd"}, "node_labels": {"tier": "db"},
    })  # fmt: skip
    ngt = api.ok(
        "POST", "/nodegrouptemplates", 201, json={"from_nodegroup": ng["uuid"], "node_count": 3}
    )
    assert ngt["source_id"] == ng["uuid"] and ngt["name"] == "ssd"
    assert ngt["flavor_id"] == "s1.large" and ngt["node_count"] == 3 and ngt["min_node_count"] == 1
    assert ngt["node_labels"] == {"tier": "db"} and ngt["cluster_template_id"] is None
    # A node group made from the NGT, plus an override; then the NGT changes and goes.
    ng2 = api.ok("POST", f"/clusters/{c['uuid']}/nodegroups", 202, json={
        "name": "ssd2", "nodegroup_template_id": ngt["uuid"], "flavor_id": "m1.large",
    })  # fmt: skip
    assert ng2["source_id"] == ngt["uuid"] and ng2["node_count"] == 3
    assert ng2["flavor_id"] == "m1.large" and ng2["node_labels"] == {"tier": "db"}
    api.ok("PATCH", f"/nodegrouptemplates/{ngt['uuid']}", json=[
        {"op": "replace", "path": "/flavor_id", "value": "g1.large"}])  # fmt: skip
    api.ok("DELETE", f"/nodegrouptemplates/{ngt['uuid']}", 204)
    assert api.groups(c["uuid"])["ssd2"]["flavor_id"] == "m1.large"
    ng3 = api.ok("POST", f"/clusters/{c['uuid']}/nodegroups", 202, json={
        "name": "ssd3", "from_nodegroup": "ssd"})  # fmt: skip
    assert ng3["flavor_id"] == "s1.large" and ng3["source_id"] == ng["uuid"]
    standalone = api.ok("POST", "/nodegrouptemplates", 201, json={
        "name": "std", "role": "worker", "flavor_id": "m1.small", "node_count": 1})  # fmt: skip
    assert standalone["rollout"] == {
        "max_surge": 1,
        "max_unavailable": 0,
        "progress_deadline_s": 600,
    }
    listed = api.ok("GET", "/nodegrouptemplates")["nodegrouptemplates"]
    assert {n["name"] for n in listed} >= {"std"}


def test_cluster_update_delete_and_nodegroup_crud(api: Api) -> None:
    c = api.cluster(name="life", image_id="fedora-coreos-40", node_count=2)
    cid = c["uuid"]
    api.ok("PATCH", f"/clusters/{cid}", 202, json=[
        {"op": "replace", "path": "/node_count", "value": 4}])  # fmt: skip
    after = api.ok("GET", f"/clusters/{cid}")
    assert after["node_count"] == 4 and after["status"] == "UPDATE_IN_PROGRESS"
    assert after["generation"] == 2 and after["updated_at"] is not None
    ng = api.ok(
        "POST", f"/clusters/{cid}/nodegroups/", 202, json={"name": "extra", "node_count": 1}
    )
    upd = api.ok("PATCH", f"/clusters/{cid}/nodegroups/extra", 202, json=[
        {"op": "replace", "path": "/max_node_count", "value": 3},
        {"op": "add", "path": "/node_labels", "value": "{'a': 'b'}"},
        {"op": "replace", "path": "/node_taints",
         "value": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    ])  # fmt: skip
    assert upd["max_node_count"] == 3 and upd["node_labels"] == {"a": "b"}
    assert upd["status"] == "UPDATE_IN_PROGRESS" and upd["generation"] == 2
    assert api.ok("GET", f"/clusters/{cid}/nodegroups/{ng['id']}")["uuid"] == ng["uuid"]
    api.ok("DELETE", f"/clusters/{cid}/nodegroups/default-worker", 400)
    api.ok("DELETE", f"/clusters/{cid}/nodegroups/extra", 204)
    assert api.groups(cid)["extra"]["status"] == "DELETE_IN_PROGRESS"
    api.ok("DELETE", f"/clusters/{cid}", 204)
    gone = api.ok("GET", f"/clusters/{cid}")
    assert gone["status"] == "DELETE_IN_PROGRESS"
    assert all(g["status"] == "DELETE_IN_PROGRESS" for g in api.groups(cid).values())
    reasons = [e["reason"] for e in api.ok("GET", f"/clusters/{cid}/events")["events"]]
    assert reasons[0] == "CreateRequested" and reasons[-1] == "DeleteRequested"
    last = api.ok("GET", f"/clusters/{cid}/events")["events"][-2]["id"]
    assert len(api.ok("GET", f"/clusters/{cid}/events?after={last}")["events"]) == 1


def test_upgrade_moves_groups_to_the_template_image(api: Api) -> None:
    api.template(name="v1", image_id="fedora-coreos-40", labels={"kube_tag": "1.20.2"})
    api.template(name="v2", image_id="fedora-coreos-41", labels={"kube_tag": "v1.20.2"})
    c = api.cluster(name="up", cluster_template_id="v1")
    api.ok("POST", f"/clusters/{c['uuid']}/actions/upgrade", 202,
           json={"cluster_template": "v2", "max_batch_size": 1})  # fmt: skip
    after = api.ok("GET", f"/clusters/{c['uuid']}")
    assert after["image_id"] == "fedora-coreos-41" and after["coe_version"] == "v1.20.2"
    g = api.groups(c["uuid"])
    assert {x["image_id"] for x in g.values()} == {"fedora-coreos-41"}
    assert all(
        x["version"] == "v1.20.2" and x["status"] == "UPDATE_IN_PROGRESS" for x in g.values()
    )


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/clustertemplates", {"name": "t", "coe": "kubernetes", "image_id": "fedora-coreos-40",
                               "labels": {"kube_tag": "v1.30"}}, "kube_tag"),
        ("/clustertemplates", {"name": "t", "coe": "kubernetes", "image_id": "fedora-coreos-40",
                               "coe_version": "v1.29.0"}, "coe_version"),
        ("/clusters", {"name": "c", "image_id": "fedora-coreos-40", "flavor_id": "m1.small",
                       "labels": {"kube_tag": "v1.31.0"}}, "kube_tag"),
    ],
)  # fmt: skip
def test_a_version_shoal_cannot_install_is_refused(
    api: Api, path: str, body: dict[str, object], field: str
) -> None:
    r = api.client.post(path, json=body)
    assert r.status_code == 400, r.text
    (err,) = r.json()["errors"]
    assert f"{field} " in err["detail"] and "supported: v1.20.2" in err["detail"]
    assert api.ok("GET", "/clustertemplates")["clustertemplates"] == []
    assert api.ok("GET", "/clusters")["clusters"] == []


def test_the_supported_version_is_accepted_either_way_it_is_written(api: Api) -> None:
    assert api.template(name="a", labels={"kube_tag": "1.20.2"})["labels"] == {"kube_tag": "1.20.2"}
    assert api.template(name="b", coe_version="v1.20.2")["coe_version"] == "v1.20.2"
