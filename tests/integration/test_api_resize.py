"""Resize through real HTTP: targeted removal by server id, provider id, name,
address or index marks exactly those nodes in the same transaction as the new
count; refusals store nothing. Node rows are seeded as the conductor writes them."""

from __future__ import annotations

from tests.integration.api_support import Api, marked, row_counts, seed_nodes
from tests.support.server import LiveServer


def test_nodes_to_remove_by_every_kind_of_name(server: LiveServer) -> None:
    api = Api(server)
    c = api.cluster(name="rs", image_id="fedora-coreos-40", node_count=6)
    worker = api.groups("rs")["default-worker"]
    nodes = seed_nodes(server, worker["uuid"], 6)
    entries = [nodes[0]["uuid"], nodes[1]["provider_id"], nodes[2]["name"], nodes[3]["address"]]
    r = api.ok("POST", "/clusters/rs/actions/resize", 202, json={
        "node_count": 2, "nodes_to_remove": entries})  # fmt: skip
    assert r == {"uuid": c["uuid"]}
    assert marked(server, worker["uuid"]) == {n["uuid"] for n in nodes[:4]}
    g = api.groups("rs")["default-worker"]
    assert g["node_count"] == 2 and g["status"] == "UPDATE_IN_PROGRESS"
    assert g["generation"] == worker["generation"] + 1
    assert api.ok("GET", "/clusters/rs")["status"] == "UPDATE_IN_PROGRESS"
    # An index counts into the group's nodes by creation; more nodes may be added at once.
    api.ok("POST", "/clusters/rs/actions/resize", 202, json={
        "node_count": 4, "nodes_to_remove": ["5"], "nodegroup": "default-worker"})  # fmt: skip
    assert nodes[5]["uuid"] in marked(server, worker["uuid"])
    assert api.groups("rs")["default-worker"]["node_count"] == 4
    listed = api.ok("GET", "/clusters/rs/nodes?nodegroup=default-worker")["nodes"]
    assert [n["name"] for n in listed] == [n["name"] for n in nodes]
    assert listed[0]["nodegroup_name"] == "default-worker" and listed[0]["role"] == "worker"
    assert listed[0]["state"] == "ACTIVE" and listed[0]["to_delete"] is True
    page = api.ok("GET", "/clusters/rs/nodes?limit=4")
    assert len(page["nodes"]) == 4 and "next" in page
    events = api.ok("GET", "/clusters/rs/events")["events"]
    assert events[-1]["reason"] == "ResizeRequested" and nodes[5]["name"] in events[-1]["message"]


def test_addresses_and_live_counts(server: LiveServer) -> None:
    api = Api(server)
    api.cluster(name="addr", image_id="fedora-coreos-40", node_count=2)
    groups = api.groups("addr")
    masters = seed_nodes(server, groups["default-master"]["uuid"], 1)
    workers = seed_nodes(server, groups["default-worker"]["uuid"], 2)
    c = api.ok("GET", "/clusters/addr")
    assert c["master_addresses"] == [masters[0]["address"]]
    assert c["node_addresses"] == [w["address"] for w in workers]
    g = api.ok("GET", "/clusters/addr/nodegroups/default-worker")
    assert (g["nodes_total"], g["nodes_ready"], g["nodes_failed"]) == (2, 2, 0)
    assert g["node_addresses"] == [w["address"] for w in workers]


def test_refusals_store_nothing(server: LiveServer) -> None:
    api = Api(server)
    api.cluster(name="rf", image_id="fedora-coreos-40", node_count=3)
    api.ok("POST", "/clusters/rf/nodegroups", 202, json={
        "name": "small", "node_count": 2, "min_node_count": 2, "max_node_count": 3})  # fmt: skip
    small = api.groups("rf")["small"]
    nodes = seed_nodes(server, small["uuid"], 2)
    other = seed_nodes(server, api.groups("rf")["default-worker"]["uuid"], 1)
    before = row_counts(server)
    for body, status in [
        ({"node_count": 1, "nodegroup": "small"}, 409),  # below min
        ({"node_count": 4, "nodegroup": "small"}, 409),  # above max
        ({"node_count": 2, "nodegroup": "small", "nodes_to_remove": [other[0]["uuid"]]}, 400),
        ({"node_count": 2, "nodegroup": "small", "nodes_to_remove": "nope"}, 400),
        ({"node_count": -1, "nodegroup": "small"}, 400),
    ]:
        r = api.post("/clusters/rf/actions/resize", json=body)
        assert r.status_code == status, (body, r.text)
    assert row_counts(server) == before
    assert marked(server, small["uuid"]) == set()
    assert api.groups("rf")["small"]["generation"] == small["generation"]
    # Replacing a named node keeps the count: it is removed and a new one added.
    api.ok("POST", "/clusters/rf/actions/resize", 202, json={
        "node_count": 2, "nodegroup": "small", "nodes_to_remove": [nodes[1]["name"]]})  # fmt: skip
    assert marked(server, small["uuid"]) == {nodes[1]["uuid"]}
    api.ok("DELETE", "/clusters/rf", 204)
    r = api.post("/clusters/rf/actions/resize", json={"node_count": 3})
    assert r.status_code == 409
