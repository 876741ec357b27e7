"""The template algebra through real HTTP on SQLite and PostgreSQL: a cluster template
from another, a node group template from another, cluster templates that reference
standalone node group templates (copied at use), and cluster create `node_groups`
entries that add to the template's groups or override one, and may name a node group
template or a node group. Each made thing keeps working once its source changes or
goes; each refusal stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api_support import Api, row_counts
from tests.support.server import LiveServer

IMAGE = "fedora-coreos-40"


@pytest.fixture
def api(server: LiveServer) -> Api:
    return Api(server)


def _refused(api: Api, method: str, path: str, body: Any, status: int, *words: str) -> None:
    r = api.request(method, path, json=body)
    assert r.status_code == status, (r.status_code, r.text)
    detail = r.json()["errors"][0]["detail"]
    assert all(w in detail for w in words), detail


def _ngt(api: Api, name: str, **attrs: Any) -> dict[str, Any]:
    return dict(api.ok("POST", "/nodegrouptemplates", 201, json={"name": name, **attrs}))


def _sizes(api: Api, cluster: str) -> dict[str, tuple[str, int, str | None]]:
    return {n: (g["role"], g["node_count"], g["flavor_id"]) for n, g in api.groups(cluster).items()}


def test_template_from_template_copies_attributes_and_entries(server: LiveServer) -> None:
    api = Api(server, role="admin")  # publishing a template is an admin's
    gpu = _ngt(api, "gpu", role="gpu", flavor_id="g1.large", node_count=2)
    src = api.template(
        name="src", flavor_id="m1.small", labels={"a": "1"}, keypair_id="kp", public=True,
        node_group_templates=[
            {"name": "cp", "role": "master", "node_count": 3},
            {"nodegroup_template_id": "gpu", "node_count": 1},
        ],
    )  # fmt: skip
    copy = api.ok("POST", "/clustertemplates", 201, json={
        "name": "copy", "from_clustertemplate": "src", "flavor_id": "m1.large"})  # fmt: skip
    assert copy["source_id"] == src["uuid"] and copy["uuid"] != src["uuid"]
    assert (copy["flavor_id"], copy["labels"], copy["keypair_id"]) == ("m1.large", {"a": "1"}, "kp")
    assert copy["image_id"] == IMAGE and copy["public"] is False  # publishing is not copied
    cp, ref = copy["node_group_templates"]
    # Embedded entries become new rows of the copy; references stay references.
    assert cp["uuid"] != src["node_group_templates"][0]["uuid"]
    assert cp["source_id"] == src["node_group_templates"][0]["uuid"]
    assert cp["cluster_template_id"] == copy["uuid"] and cp["nodegroup_template_id"] is None
    assert cp["node_count"] == 3 and cp["role"] == "master"
    assert ref["nodegroup_template_id"] == gpu["uuid"] and ref["name"] == "gpu"
    assert ref["node_count"] == 1 and "flavor_id" not in ref  # only its overrides
    # The source changes, then goes: the copy is unchanged and still makes clusters.
    api.ok("PATCH", "/clustertemplates/src", json=[
        {"op": "replace", "path": "/flavor_id", "value": "m1.tiny"},
        {"op": "replace", "path": "/node_group_templates", "value": []},
    ])  # fmt: skip
    api.ok("DELETE", "/clustertemplates/src", 204)
    again = api.ok("GET", "/clustertemplates/copy")
    assert again["flavor_id"] == "m1.large" and len(again["node_group_templates"]) == 2
    c = api.cluster(name="from-copy", cluster_template_id="copy")
    assert c["cluster_template_id"] == copy["uuid"]
    assert _sizes(api, c["uuid"]) == {
        "cp": ("master", 3, "m1.large"),
        "gpu": ("gpu", 1, "g1.large"),
    }
    # Request entries replace the source's, as request attributes win.
    other = api.ok("POST", "/clustertemplates", 201, json={
        "name": "other", "from_clustertemplate": copy["uuid"],
        "node_group_templates": [{"name": "solo", "role": "master"}]})  # fmt: skip
    assert [n["name"] for n in other["node_group_templates"]] == ["solo"]


def test_a_public_template_of_another_project_is_copied_with_its_references_embedded(
    server: LiveServer,
) -> None:
    owner, other = Api(server, role="admin"), Api(server)  # an admin publishes
    gpu = _ngt(owner, "gpu", role="gpu", flavor_id="g1.large", node_count=2)
    owner.template(name="shared", public=True, node_group_templates=[
        {"name": "cp", "role": "master"},
        {"nodegroup_template_id": "gpu", "node_count": 4},
    ])  # fmt: skip
    mine = other.ok("POST", "/clustertemplates", 201, json={
        "name": "mine", "from_clustertemplate": "shared"})  # fmt: skip
    embedded = mine["node_group_templates"][1]
    assert embedded["nodegroup_template_id"] is None and embedded["source_id"] == gpu["uuid"]
    assert (embedded["flavor_id"], embedded["node_count"]) == ("g1.large", 4)
    # The owner's NGT is not held by the other project's template.
    owner.ok("DELETE", "/clustertemplates/shared", 204)
    owner.ok("DELETE", f"/nodegrouptemplates/{gpu['uuid']}", 204)
    c = other.cluster(name="c", cluster_template_id="mine")
    assert _sizes(other, c["uuid"])["gpu"] == ("gpu", 4, "g1.large")


def test_template_from_template_refusals_store_nothing(server: LiveServer, api: Api) -> None:
    api.template(name="t")
    api.cluster(name="c", image_id=IMAGE)
    before = row_counts(server)
    ct = "/clustertemplates"
    _refused(api, "POST", ct, {"from_clustertemplate": "t", "from_cluster": "c"}, 400, "not both")
    _refused(api, "POST", ct, {"from_clustertemplate": "nope"}, 404, "nope")
    _refused(api, "POST", ct, {"from_clustertemplate": "t", "coe": "swarm"}, 400, "coe")
    _refused(api, "POST", ct, {"from_clustertemplate": "t", "node_group_templates": [
        {"name": "x", "nodegroup_template_id": "nope"}]}, 400, "nope")  # fmt: skip
    assert Api(server).post(ct, json={"from_clustertemplate": "t"}).status_code == 404
    assert row_counts(server) == before


def test_ngt_from_ngt_copies_and_stays_independent(server: LiveServer, api: Api) -> None:
    src = _ngt(api, "ssd", flavor_id="s1.large", node_count=2, node_labels={"disk": "ssd"},
               deletion_policy="oldest")  # fmt: skip
    copy = api.ok("POST", "/nodegrouptemplates", 201, json={
        "from_nodegrouptemplate": "ssd", "node_count": 3})  # fmt: skip
    assert copy["source_id"] == src["uuid"] and copy["name"].startswith("ngt-")
    assert (copy["flavor_id"], copy["node_count"], copy["deletion_policy"]) == (
        "s1.large", 3, "oldest")  # fmt: skip
    assert copy["node_labels"] == {"disk": "ssd"} and copy["cluster_template_id"] is None
    named = api.ok("POST", "/nodegrouptemplates", 201, json={
        "name": "ssd2", "from_nodegrouptemplate": src["uuid"]})  # fmt: skip
    assert named["name"] == "ssd2" and named["node_count"] == 2
    api.ok("PATCH", "/nodegrouptemplates/ssd", json=[
        {"op": "replace", "path": "/flavor_id", "value": "g1.large"}])  # fmt: skip
    api.ok("DELETE", "/nodegrouptemplates/ssd", 204)
    assert api.ok("GET", f"/nodegrouptemplates/{copy['uuid']}")["flavor_id"] == "s1.large"
    c = api.cluster(name="c", image_id=IMAGE)
    ng = api.ok("POST", "/clusters/c/nodegroups", 202, json={
        "name": "disk", "nodegroup_template_id": "ssd2"})  # fmt: skip
    assert ng["flavor_id"] == "s1.large" and ng["source_id"] == named["uuid"]
    # Refusals: both sources, an unknown one, an embedded NGT (not standalone).
    ct = api.template(name="t", node_group_templates=[{"name": "e", "role": "master"}])
    embedded = ct["node_group_templates"][0]["uuid"]
    group = api.groups(c["uuid"])["default-worker"]["uuid"]
    before = row_counts(server)
    ngt = "/nodegrouptemplates"
    body = {"from_nodegrouptemplate": "ssd2", "from_nodegroup": group}
    _refused(api, "POST", ngt, body, 400, "not both")
    _refused(api, "POST", ngt, {"from_nodegrouptemplate": "nope"}, 404, "nope")
    _refused(api, "POST", ngt, {"from_nodegrouptemplate": embedded}, 404, embedded)
    _refused(
        api, "POST", ngt, {"from_nodegrouptemplate": "ssd2", "node_count": -1}, 400, "node_count"
    )
    assert row_counts(server) == before


def test_template_references_are_copied_at_use_and_hold_the_ngt(
    server: LiveServer, api: Api
) -> None:
    gpu = _ngt(api, "gpu", role="gpu", flavor_id="g1.large", node_count=2,
               node_labels={"accel": "nvidia"})  # fmt: skip
    ct = api.template(name="mix", node_group_templates=[
        {"name": "cp", "role": "master", "node_count": 1},
        {"nodegroup_template_id": "gpu"},
        {"nodegroup_template_id": gpu["uuid"], "name": "gpu-big", "node_count": 4,
         "labels": "{'size': 'big'}"},
    ])  # fmt: skip
    entries = {n["name"]: n for n in ct["node_group_templates"]}
    assert entries["cp"]["nodegroup_template_id"] is None
    assert entries["gpu"]["nodegroup_template_id"] == gpu["uuid"]
    assert set(entries["gpu"]) >= {"uuid", "name", "cluster_template_id"}
    assert "flavor_id" not in entries["gpu"]
    assert entries["gpu-big"]["node_count"] == 4 and entries["gpu-big"]["labels"] == {"size": "big"}
    assert (
        api.ok("GET", "/clustertemplates/mix")["node_group_templates"] == ct["node_group_templates"]
    )
    standalone = api.ok("GET", "/nodegrouptemplates")["nodegrouptemplates"]
    assert [n["name"] for n in standalone] == ["gpu"]  # references are no standalone NGTs

    c1 = api.cluster(name="c1", cluster_template_id="mix")
    g1 = api.groups(c1["uuid"])
    assert _sizes(api, c1["uuid"]) == {
        "cp": ("master", 1, "m1.small"), "gpu": ("gpu", 2, "g1.large"),
        "gpu-big": ("gpu", 4, "g1.large"),
    }  # fmt: skip
    assert g1["gpu"]["source_id"] == gpu["uuid"] and g1["gpu"]["node_labels"] == {"accel": "nvidia"}
    assert g1["gpu-big"]["labels"] == {"size": "big"}

    # The NGT changes: the next cluster copies it as it is then; c1 keeps its copy.
    api.ok("PATCH", "/nodegrouptemplates/gpu", json=[
        {"op": "replace", "path": "/flavor_id", "value": "g2.huge"}])  # fmt: skip
    c2 = api.cluster(name="c2", cluster_template_id="mix")
    assert _sizes(api, c2["uuid"])["gpu-big"] == ("gpu", 4, "g2.huge")
    assert _sizes(api, c1["uuid"])["gpu"] == ("gpu", 2, "g1.large")

    # Deleting a referenced NGT is refused, naming the template; nothing changes.
    api.template(name="also", node_group_templates=[
        {"name": "m", "role": "master"}, {"nodegroup_template_id": "gpu"}])  # fmt: skip
    before = row_counts(server)
    _refused(api, "DELETE", "/nodegrouptemplates/gpu", None, 409, "also, mix")
    assert row_counts(server) == before
    # Once no template references it, it goes; the clusters made from it stay as they are.
    only_cp = [{"name": "cp", "role": "master"}]
    api.ok("PATCH", "/clustertemplates/mix", json=[
        {"op": "replace", "path": "/node_group_templates", "value": only_cp}])  # fmt: skip
    _refused(api, "DELETE", "/nodegrouptemplates/gpu", None, 409, "also")
    api.ok("DELETE", "/clustertemplates/also", 204)
    api.ok("DELETE", "/nodegrouptemplates/gpu", 204)
    assert _sizes(api, c2["uuid"])["gpu"] == ("gpu", 2, "g2.huge")
    assert api.groups(c1["uuid"])["gpu"]["source_id"] == gpu["uuid"]  # display only


def test_template_reference_refusals_store_nothing(server: LiveServer, api: Api) -> None:
    _ngt(api, "gpu", node_count=2)
    ct = api.template(name="t", node_group_templates=[{"name": "e", "role": "master"}])
    theirs = _ngt(Api(server), "theirs")
    before = row_counts(server)
    path = "/clustertemplates"

    def body(*entries: dict[str, Any]) -> dict[str, Any]:
        return {"name": "x", "image_id": IMAGE, "node_group_templates": list(entries)}

    _refused(api, "POST", path, body({"nodegroup_template_id": "nope"}), 400,
             "node_group_templates", "nope")  # fmt: skip
    embedded = ct["node_group_templates"][0]["uuid"]
    _refused(api, "POST", path, body({"nodegroup_template_id": embedded}), 400, embedded)
    _refused(
        api, "POST", path, body({"nodegroup_template_id": theirs["uuid"]}), 400, theirs["uuid"]
    )
    _refused(api, "POST", path, body({"nodegroup_template_id": "gpu", "from_nodegroup": "x"}),
             400, "from_nodegroup")  # fmt: skip
    _refused(api, "POST", path, body({"nodegroup_template_id": "gpu", "max_node_count": 1}),
             409, "max_node_count")  # fmt: skip
    _refused(api, "POST", path, body({"nodegroup_template_id": "gpu"}, {"name": "gpu"}),
             400, "unique")  # fmt: skip
    patch = [{"op": "replace", "path": "/node_group_templates",
              "value": [{"nodegroup_template_id": "nope"}]}]  # fmt: skip
    _refused(api, "PATCH", f"{path}/t", patch, 400, "nope")
    assert row_counts(server) == before


def test_cluster_entries_add_to_the_template_groups_or_override_them(api: Api) -> None:
    _ngt(api, "gpu", role="gpu", flavor_id="g1.large", node_count=2)
    api.template(name="t", node_group_templates=[
        {"name": "cp", "role": "master", "node_count": 3},
        {"name": "web", "node_count": 2, "flavor_id": "m1.small", "node_labels": {"tier": "web"}},
    ])  # fmt: skip
    c = api.cluster(name="c", cluster_template_id="t", node_groups=[
        {"name": "web", "flavor_id": "m1.xlarge"},
        {"name": "accel", "nodegroup_template_id": "gpu", "node_count": 1},
        {"name": "db", "node_count": 1, "flavor_id": "s1.large"},
    ])  # fmt: skip
    g = api.groups(c["uuid"])
    assert _sizes(api, c["uuid"]) == {
        "cp": ("master", 3, "m1.small"), "web": ("worker", 2, "m1.xlarge"),
        "accel": ("gpu", 1, "g1.large"), "db": ("worker", 1, "s1.large"),
    }  # fmt: skip
    assert g["web"]["node_labels"] == {"tier": "web"} and g["web"]["is_default"]
    assert not g["accel"]["is_default"] and not g["db"]["is_default"]
    # A template without node group templates: Magnum's two groups, plus the entries.
    api.template(name="plain")
    c2 = api.cluster(name="c2", cluster_template_id="plain", node_count=3, node_groups=[
        {"name": "default-master", "flavor_id": "m1.medium"}, {"name": "extra"}])  # fmt: skip
    assert _sizes(api, c2["uuid"]) == {
        "default-master": ("master", 1, "m1.medium"), "default-worker": ("worker", 3, "m1.small"),
        "extra": ("worker", 1, "m1.small"),
    }  # fmt: skip
    # A clone: the source's groups, plus the entries.
    c3 = api.cluster(name="c3", from_cluster="c", node_groups=[
        {"name": "cp", "node_count": 5}, {"name": "more", "from_nodegroup": "accel"}])  # fmt: skip
    s3 = _sizes(api, c3["uuid"])
    assert s3["cp"] == ("master", 5, "m1.small") and s3["web"] == ("worker", 2, "m1.xlarge")
    assert s3["more"] == ("gpu", 1, "g1.large") and len(s3) == 5
    # Without a template or a clone, node_groups is the whole set: no default groups.
    c4 = api.cluster(name="c4", image_id=IMAGE, node_groups=[
        {"name": "m", "role": "master"},
        {"name": "w", "nodegroup_template_id": "gpu"},
    ])  # fmt: skip
    assert set(api.groups(c4["uuid"])) == {"m", "w"}


def test_cluster_entries_copy_what_they_name_and_keep_no_reference(api: Api) -> None:
    gpu = _ngt(api, "gpu", role="gpu", flavor_id="g1.large", node_count=2)
    src = api.cluster(name="src", image_id=IMAGE, node_groups=[
        {"name": "m", "role": "master"},
        {"name": "ssd", "flavor_id": "s1.large", "node_count": 2, "availability_zones": ["az-2"]},
    ])  # fmt: skip
    ssd = api.groups(src["uuid"])["ssd"]
    c = api.cluster(name="c", image_id=IMAGE, node_groups=[
        {"name": "m", "role": "master"},
        {"nodegroup_template_id": "gpu", "node_labels": {"k": "v"}},
        {"name": "disk", "from_nodegroup": ssd["uuid"], "node_count": 3},
    ])  # fmt: skip
    g = api.groups(c["uuid"])
    assert g["gpu"]["source_id"] == gpu["uuid"] and g["gpu"]["flavor_id"] == "g1.large"
    assert g["gpu"]["node_labels"] == {"k": "v"} and g["gpu"]["node_count"] == 2
    assert g["disk"]["source_id"] == ssd["uuid"] and g["disk"]["node_count"] == 3
    assert g["disk"]["availability_zones"] == ["az-2"] and g["disk"]["flavor_id"] == "s1.large"
    # The sources change and go; the cluster's groups are its own.
    api.ok("PATCH", "/nodegrouptemplates/gpu", json=[
        {"op": "replace", "path": "/flavor_id", "value": "g2.huge"}])  # fmt: skip
    api.ok("DELETE", "/nodegrouptemplates/gpu", 204)
    api.ok("DELETE", "/clusters/src", 204)
    after = _sizes(api, c["uuid"])
    assert after["gpu"] == ("gpu", 2, "g1.large") and after["disk"] == ("worker", 3, "s1.large")


def test_cluster_entry_refusals_store_nothing(server: LiveServer, api: Api) -> None:
    _ngt(api, "gpu", node_count=1)
    api.template(name="t", node_group_templates=[{"name": "cp", "role": "master"}])
    api.cluster(name="c", image_id=IMAGE)
    theirs = _ngt(Api(server), "theirs")
    before = row_counts(server)

    def create(*groups: dict[str, Any], **body: Any) -> dict[str, Any]:
        return {"name": "x", "cluster_template_id": "t", "node_groups": list(groups), **body}

    cl = "/clusters"
    both = {"name": "w", "nodegroup_template_id": "gpu", "from_nodegroup": "default-worker"}
    _refused(api, "POST", cl, create(both), 400, "not both")
    _refused(api, "POST", cl, create({"nodegroup_template_id": "nope"}), 404, "nope")
    _refused(api, "POST", cl, create({"nodegroup_template_id": theirs["uuid"]}), 404, "could not")
    _refused(api, "POST", cl, create({"from_nodegroup": "nope"}), 404, "nope")
    _refused(api, "POST", cl, create({"node_count": 1}), 400, "node_groups.name")
    _refused(api, "POST", cl, create({"name": "w"}, {"name": "w"}), 409, "already exists")
    # The master rules hold for the combined set: 1 + 1 masters is even.
    _refused(api, "POST", cl, create({"name": "m2", "role": "master"}), 400, "odd")
    _refused(api, "POST", cl, create({"name": "cp", "node_count": 0}), 400, "master")
    _refused(api, "POST", cl, create({"name": "big", "node_count": 1001}), 400, "1000 nodes")
    ng = "/clusters/c/nodegroups"
    _refused(api, "POST", ng, {**both, "name": "n"}, 400, "not both")
    _refused(api, "POST", ng, {"name": "n", "from_nodegroup": "nope"}, 404, "nope")
    assert row_counts(server) == before
