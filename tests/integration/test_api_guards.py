"""Guards on desired state, through real HTTP: nothing changes a cluster being deleted,
the masters stay an odd number with one always running, and embedded node group
templates stay inside their cluster template. Each refusal stores nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.integration.api_support import Api, marked, row_counts, seed_nodes
from tests.support.server import LiveServer


def test_changes_to_a_cluster_being_deleted_get_409_and_change_nothing(
    server: LiveServer,
) -> None:
    api = Api(server)
    api.cluster(name="gone", image_id="fedora-coreos-40", node_count=2)
    api.ok("POST", "/clusters/gone/nodegroups", 202, json={"name": "gpu", "node_count": 1})
    api.ok("DELETE", "/clusters/gone", 204)
    before, groups = row_counts(server), api.groups("gone")
    refused = [
        ("PATCH", "/clusters/gone", [{"op": "replace", "path": "/labels", "value": {"a": "b"}}]),
        ("PATCH", "/clusters/gone", [{"op": "replace", "path": "/node_count", "value": 3}]),
        ("PATCH", "/clusters/gone/nodegroups/gpu",
         [{"op": "replace", "path": "/max_node_count", "value": 5}]),
        ("DELETE", "/clusters/gone/nodegroups/gpu", None),
        ("POST", "/clusters/gone/nodegroups", {"name": "more", "node_count": 1}),
        ("POST", "/clusters/gone/actions/resize", {"node_count": 3}),
    ]  # fmt: skip
    for method, path, body in refused:
        r = api.request(method, path, json=body)
        assert r.status_code == 409, (method, path, r.text)
        err = r.json()["errors"][0]
        assert err["code"] == "client" and "being deleted" in err["detail"]
    c = api.ok("GET", "/clusters/gone")
    assert c["status"] == "DELETE_IN_PROGRESS" and c["labels"] == {}
    assert api.groups("gone") == groups
    assert row_counts(server) == before


def test_masters_stay_odd_and_at_least_one_keeps_running(server: LiveServer) -> None:
    api = Api(server)
    before = row_counts(server)
    for body in (
        {"name": "even", "image_id": "fedora-coreos-40", "master_count": 2},
        {"name": "even", "image_id": "fedora-coreos-40", "master_count": 0},
        {"name": "even", "image_id": "fedora-coreos-40", "node_groups": [
            {"name": "m-a", "role": "master", "node_count": 1},
            {"name": "m-b", "role": "master", "node_count": 1}]},
    ):  # fmt: skip
        r = api.post("/clusters", json=body)
        assert r.status_code == 400, (body, r.text)
        assert "master_count" in r.json()["errors"][0]["detail"]
    assert row_counts(server) == before

    api.cluster(name="ha", image_id="fedora-coreos-40", master_count=3)
    master = api.groups("ha")["default-master"]
    masters = seed_nodes(server, master["uuid"], 3)
    before = row_counts(server)
    for method, path, body in [
        ("POST", "/clusters/ha/actions/resize", {"node_count": 2, "nodegroup": "default-master"}),
        ("PATCH", "/clusters/ha", [{"op": "replace", "path": "/master_count", "value": 4}]),
        # Naming every master would leave the control plane empty until new ones boot.
        ("POST", "/clusters/ha/actions/resize", {"node_count": 3, "nodegroup": "default-master",
         "nodes_to_remove": [n["name"] for n in masters]}),
    ]:  # fmt: skip
        r = api.request(method, path, json=body)
        assert r.status_code == 400, (body, r.text)
    assert row_counts(server) == before and marked(server, master["uuid"]) == set()
    assert api.groups("ha")["default-master"]["generation"] == master["generation"]
    # Two of three masters may be replaced: one keeps running.
    api.ok("POST", "/clusters/ha/actions/resize", 202, json={
        "node_count": 3, "nodegroup": "default-master",
        "nodes_to_remove": [masters[0]["uuid"], masters[1]["uuid"]]})  # fmt: skip
    assert marked(server, master["uuid"]) == {masters[0]["uuid"], masters[1]["uuid"]}
    api.ok("PATCH", "/clusters/ha", 202, json=[
        {"op": "replace", "path": "/master_count", "value": 5}])  # fmt: skip
    assert api.ok("GET", "/clusters/ha")["master_count"] == 5


def test_embedded_templates_stay_out_of_the_standalone_collection(server: LiveServer) -> None:
    api = Api(server)
    api.template("hetero", node_group_templates=[
        {"name": "masters", "role": "master", "node_count": 1},
        {"name": "gpu", "role": "worker", "flavor_id": "g1.large", "node_count": 2}])  # fmt: skip
    alone = api.ok("POST", "/nodegrouptemplates", 201, json={
        "name": "gpu", "flavor_id": "g1.xlarge", "node_count": 1})  # fmt: skip
    listed = api.ok("GET", "/nodegrouptemplates")["nodegrouptemplates"]
    assert [t["uuid"] for t in listed] == [alone["uuid"]]
    # The name resolves to the standalone template only: no "Multiple ... exist" clash.
    assert api.ok("GET", "/nodegrouptemplates/gpu")["uuid"] == alone["uuid"]
    api.cluster(name="h", cluster_template_id="hetero")
    g = api.ok("POST", "/clusters/h/nodegroups", 202, json={
        "name": "gpu2", "nodegroup_template_id": "gpu"})  # fmt: skip
    assert g["flavor_id"] == "g1.xlarge"
    embedded = api.ok("GET", "/clustertemplates/hetero")["node_group_templates"]
    for t in embedded:
        r = api.delete(f"/nodegrouptemplates/{t['uuid']}")
        assert r.status_code == 404, r.text
    assert len(api.ok("GET", "/clustertemplates/hetero")["node_group_templates"]) == 2


def test_the_cluster_quota_holds_under_concurrent_creates(server: LiveServer) -> None:
    api = Api(server)
    # Magnum's default: 20 clusters per project, then 403.
    for i in range(20):
        api.ok("POST", "/clusters", 202, json={"name": f"q{i}", "image_id": "fedora-coreos-40"})
    r = api.post("/clusters", json={"name": "q20", "image_id": "fedora-coreos-40"})
    assert r.status_code == 403 and "maximum clusters" in r.json()["errors"][0]["title"]

    racer = Api(server)
    Api(server, role="admin").ok("POST", "/quotas", 201, json={
        "project_id": racer.project, "resource": "Cluster", "hard_limit": 3})  # fmt: skip

    def create(i: int) -> int:
        body = {"name": f"r{i}", "image_id": "fedora-coreos-40"}
        return int(racer.post("/clusters", json=body).status_code)

    with ThreadPoolExecutor(max_workers=12) as pool:
        codes = sorted(pool.map(create, range(12)))
    assert codes == [202] * 3 + [403] * 9, codes
    assert len(racer.ok("GET", "/clusters")["clusters"]) == 3
