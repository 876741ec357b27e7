"""The conductor behind the real HTTP API (uvicorn on 127.0.0.1, embedded
conductor, sim cloud), driven with httpx and python-magnumclient: every
behaviour of issue 3, checked from shoal's rows and from the cloud's side
(`/v1/sim/servers`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conductor_http_support import Api, conductor_server, wait
from tests.support.server import LiveServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with conductor_server(tmp_path) as srv:
        yield srv


@pytest.fixture
def api(server: LiveServer) -> Iterator[Api]:
    a = Api(server)
    yield a
    a.http.close()


def test_heterogeneous_cluster_named_removal_and_delete_through_magnumclient(api: Api) -> None:
    mc = api.mc
    cid = api.create("het", [
        {"name": "masters", "role": "master", "flavor_id": "m1.small", "node_count": 3,
         "availability_zones": ["az-1", "az-2", "az-3"]},
        {"name": "gpu", "role": "worker", "flavor_id": "g1.large", "node_count": 2},
        {"name": "ssd", "role": "worker", "flavor_id": "s1.large", "node_count": 3,
         "availability_zones": ["az-2"]},
    ], keypair="k")  # fmt: skip
    wait(lambda: mc.clusters.get(cid).status != "CREATE_IN_PROGRESS")
    c = mc.clusters.get(cid)
    assert c.status == "CREATE_COMPLETE", c.status_reason
    assert c.health_status == "HEALTHY"
    assert set(c.health_status_reason) == {"masters", "gpu", "ssd", "api"}
    nodes = api.nodes(cid)
    by_group: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        by_group.setdefault(n["nodegroup_name"], []).append(n)
    masters = by_group["masters"]
    assert sorted(c.master_addresses) == sorted(n["address"] for n in masters)
    assert sorted(c.node_addresses) == sorted(
        n["address"] for g in ("gpu", "ssd") for n in by_group[g]
    )
    assert sorted(n["availability_zone"] for n in masters) == ["az-1", "az-2", "az-3"]
    assert {n["availability_zone"] for n in by_group["ssd"]} == {"az-2"}
    assert c.api_address in {f"https://{n['address']}:6443" for n in masters}
    api.assert_cloud_matches(cid)
    flavors = {s["machine_id"]: s["flavor"] for s in api.servers(cluster=cid)}
    assert {flavors[n["uuid"]] for n in by_group["gpu"]} == {"g1.large"}
    assert {flavors[n["uuid"]] for n in by_group["ssd"]} == {"s1.large"}

    # Remove exactly one named SSD node by name: every other node keeps its id.
    ssd_ng = next(g for g in mc.nodegroups.list(cid) if g.name == "ssd")
    victim = by_group["ssd"][1]
    mc.clusters.resize(cid, 2, nodes_to_remove=[victim["name"]], nodegroup=ssd_ng.uuid)
    api.wait_settled(cid, len(nodes) - 1)
    after = api.ids(cid)
    assert after == {n["uuid"] for n in nodes} - {victim["uuid"]}
    api.assert_cloud_matches(cid)

    mc.clusters.delete(cid)
    wait(lambda: api.status(cid) == "GONE", what="the cluster to 404")
    wait(lambda: api.servers() == [], what="the cloud to empty")
    assert api.http.get(f"/clusters/{cid}/events").status_code == 404
    assert api.http.get(f"/clusters/{cid}/nodes").status_code == 404


def test_resize_up_and_down_through_magnumclient(api: Api) -> None:
    mc = api.mc
    cid = api.create("rs", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": 2,
         "availability_zones": ["az-1", "az-2"]},
    ])  # fmt: skip
    api.wait_settled(cid, 3)
    first = api.ids(cid, "w")

    mc.clusters.resize(cid, 5)  # the default worker group
    api.wait_settled(cid, 6)
    c = mc.clusters.get(cid)
    assert c.status == "UPDATE_COMPLETE" and c.node_count == 5 and len(c.node_addresses) == 5
    grown = api.nodes(cid, "w")
    assert first < {n["uuid"] for n in grown}, "growing replaced an existing node"
    assert Counter(n["availability_zone"] for n in grown) == {"az-1": 3, "az-2": 2}
    api.assert_cloud_matches(cid)

    # Magnum's other way: PATCH node_count. Unnamed scale-down takes the newest.
    mc.clusters.update(cid, [{"op": "replace", "path": "/node_count", "value": 3}])
    api.wait_settled(cid, 4)
    oldest = sorted(grown, key=lambda n: n["created_at"])[:3]
    assert api.ids(cid, "w") == {n["uuid"] for n in oldest}
    assert mc.clusters.get(cid).node_count == 3
    api.assert_cloud_matches(cid)
    assert api.group(cid, "w")["status"] == "UPDATE_COMPLETE"


def test_nodes_to_remove_takes_exactly_the_named_nodes(api: Api) -> None:
    cid = api.create("named", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": 7,
         "availability_zones": ["az-1", "az-2", "az-3"]},
    ])  # fmt: skip
    api.wait_settled(cid, 8)
    before = api.nodes(cid, "w")
    cloud_before = set(api.live_servers(cid))
    # By server id, by node name and by address, from the middle of the group.
    doomed = [before[1], before[3], before[5]]
    names = [doomed[0]["uuid"], doomed[1]["name"], doomed[2]["address"]]
    api.resize(cid, 4, "w", remove=names)
    api.wait_settled(cid, 5)
    gone = {n["uuid"] for n in doomed}
    assert api.ids(cid, "w") == {n["uuid"] for n in before} - gone
    assert set(api.live_servers(cid)) == cloud_before - gone, "the cloud lost another machine"
    api.assert_cloud_matches(cid)
    events = [e for e in api.events(cid) if e["reason"] == "ResizeRequested"]
    assert all(n["name"] in events[-1]["message"] for n in doomed)

    # Named removal and growth in one request: the named node goes, two are added.
    keep = api.ids(cid, "w") - {before[0]["uuid"]}
    api.resize(cid, 5, "w", remove=[before[0]["name"]])
    api.wait_settled(cid, 6)
    final = api.ids(cid, "w")
    assert keep < final and before[0]["uuid"] not in final and len(final) == 5
    api.assert_cloud_matches(cid)


def _refused(api: Api, cid: str, body: dict[str, Any], status: int, words: str) -> None:
    r = api.http.post(f"/clusters/{cid}/actions/resize", json=body)
    assert r.status_code == status, r.text
    err = r.json()["errors"][0]
    assert err["status"] == status and words in err["detail"], err


def test_refusals_are_clear_4xx_and_change_nothing(api: Api) -> None:
    cid = api.create("ref", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": 3, "min_node_count": 2},
    ])  # fmt: skip
    api.wait_settled(cid, 4)
    nodes = api.nodes(cid)
    w = [n for n in nodes if n["nodegroup_name"] == "w"]
    group = api.group(cid, "w")
    events = len(api.events(cid))

    _refused(api, cid, {"node_count": 1, "nodegroup": "w"}, 409, "min_node_count = 2")
    named = [w[0]["name"], w[1]["name"]]
    _refused(api, cid, {"node_count": 1, "nodegroup": "w", "nodes_to_remove": named}, 409,
             "min_node_count = 2")  # fmt: skip
    _refused(api, cid, {"node_count": 0, "nodegroup": "m"}, 400, "last master")
    _refused(api, cid, {"node_count": 2, "nodegroup": "w", "nodes_to_remove": ["no-such"]}, 400,
             "'no-such' is not a node of this node group")  # fmt: skip
    m_node = next(n for n in nodes if n["nodegroup_name"] == "m")
    _refused(api, cid, {"node_count": 2, "nodegroup": "w", "nodes_to_remove": [m_node["name"]]},
             400, "is not a node of this node group")  # fmt: skip

    # Nothing was stored: counts, generation, marks, status, events, machines.
    after = api.group(cid, "w")
    assert (after["node_count"], after["generation"], after["status"]) == (
        3, group["generation"], group["status"],
    )  # fmt: skip
    assert api.nodes(cid) == nodes and not any(n["to_delete"] for n in nodes)
    assert len(api.events(cid)) == events
    assert api.status(cid) == "CREATE_COMPLETE"
    api.assert_cloud_matches(cid)


def test_quota_blocked_group_resumes_by_itself_when_quota_is_raised(api: Api) -> None:
    # 1 master (1 core) + 4 workers (2 cores each) in a 5-core quota: the master
    # and 2 workers fit, whatever the order; the workers' group is blocked.
    api.ok("PUT", "/sim/quotas/default", json={"cores": 5})
    cid = api.create("quota", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.medium", "node_count": 4},
    ])  # fmt: skip

    def blocked() -> bool:
        g = api.group(cid, "w")
        return (g["status_reason"] or "").startswith("BLOCKED: quota exceeded")

    wait(blocked, what="the workers to be blocked")
    g = api.group(cid, "w")
    assert g["status"] == "CREATE_IN_PROGRESS"
    assert "cores" in g["status_reason"] and "5" in g["status_reason"], g["status_reason"]
    ready = next(c for c in g["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "Blocked"
    # The cluster pass that aggregates the group's reason runs after the group pass.
    wait(
        lambda: "BLOCKED: quota exceeded" in (api.cluster(cid)["status_reason"] or ""),
        what="the cluster to report the block",
    )
    assert api.cluster(cid)["status"] == "CREATE_IN_PROGRESS"
    wait(lambda: api.group(cid, "m")["status"] == "CREATE_COMPLETE", what="the master")
    kept = set(api.live_servers(cid))
    assert len(kept) == 3, "what succeeded is kept"
    assert any(e["reason"] == "Blocked" for e in api.events(cid))

    api.ok("PUT", "/sim/quotas/default", json={"cores": 100})  # no user action after this
    api.wait_settled(cid, 5)
    assert api.cluster(cid)["status"] == "CREATE_COMPLETE"
    assert api.group(cid, "w")["status_reason"] is None
    assert kept < set(api.live_servers(cid))
    api.assert_cloud_matches(cid)


def test_no_valid_host_in_one_zone_places_the_node_in_the_next(api: Api) -> None:
    api.ok("POST", "/sim/faults", 201, json={"kind": "no_valid_host", "az": "az-1"})
    cid = api.create("nvh", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 3,
         "availability_zones": ["az-1", "az-2", "az-3"]},
    ])  # fmt: skip
    api.wait_settled(cid, 3)
    zones = Counter(n["availability_zone"] for n in api.nodes(cid))
    assert zones == {"az-2": 2, "az-3": 1}
    assert Counter(s["az"] for s in api.live_servers(cid).values()) == zones
    nvh = [e for e in api.events(cid) if e["reason"] == "NoValidHost"]
    assert len(nvh) == 1 and "az-1" in nvh[0]["message"] and "az-2" in nvh[0]["message"]
    api.assert_cloud_matches(cid)


def test_a_server_that_goes_to_error_is_replaced(api: Api) -> None:
    api.ok("POST", "/sim/faults", 201,
           json={"kind": "server_error", "count": 1, "message": "disk on fire"})  # fmt: skip
    cid = api.create("err", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": 3},
    ])  # fmt: skip
    api.wait_settled(cid, 4)
    errs = [e for e in api.events(cid) if e["reason"] == "MachineError"]
    assert len(errs) == 1 and "disk on fire" in errs[0]["message"]
    api.assert_cloud_matches(cid)
    wait(lambda: len(api.servers()) == 4, what="the ERROR machine to be deleted")
    assert all(s["state"] == "ACTIVE" for s in api.servers())


def test_api_address_is_known_while_workers_are_still_building(api: Api) -> None:
    # Worker boots end in ERROR until the test lifts the fault, once the API address is
    # known: the workers cannot be ready before the one master is, whatever the load
    # (four faults let a loaded machine's workers catch up, the address then known late).
    api.ok("PATCH", "/sim/config", json={"boot_seconds": 1.0, "jitter": 0})
    api.ok("POST", "/sim/faults", 201,
           json={"kind": "server_error", "flavor": "m1.medium", "count": None})  # fmt: skip
    cid = api.create("early", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.medium", "node_count": 2},
    ])  # fmt: skip
    wait(lambda: bool(api.cluster(cid)["api_address"]), what="api_address")
    c = api.cluster(cid)
    workers = api.nodes(cid, "w")
    assert c["status"] == "CREATE_IN_PROGRESS"
    # A failed worker is dropped once its machine is gone and its successor waits out the
    # boot backoff: the group may list no worker at all, never two ready ones.
    ready = [n["name"] for n in workers if n["state"] == "ACTIVE"]
    assert len(ready) < 2, f"workers were all ready already: {ready}"
    master = api.nodes(cid, "m")[0]
    assert c["api_address"] == f"https://{master['address']}:6443"
    api.ok("DELETE", "/sim/faults", 204)  # the workers' boots now succeed
    api.wait_settled(cid, 3)
    reasons = [(e["reason"], e["nodegroup_id"]) for e in api.events(cid)]
    w_uuid = api.group(cid, "w")["uuid"]
    known = next(i for i, r in enumerate(reasons) if r[0] == "APIAddressKnown")
    last_worker_ready = max(i for i, r in enumerate(reasons) if r == ("NodesReady", w_uuid))
    assert known < last_worker_ready


@pytest.mark.slow
def test_failed_group_after_create_timeout_recovers_on_retry(api: Api) -> None:
    # create_timeout is in minutes (Magnum): the smallest is 1, so this waits ~1 min.
    api.ok("PUT", "/sim/quotas/default", json={"cores": 3})
    t0 = time.monotonic()
    cid = api.create("to", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.medium", "node_count": 2},
    ], create_timeout=1)  # fmt: skip
    wait(lambda: (api.group(cid, "w")["status_reason"] or "").startswith("BLOCKED"))
    assert api.group(cid, "w")["status"] == "CREATE_IN_PROGRESS"
    wait(lambda: api.group(cid, "w")["status"] == "CREATE_FAILED", 90, "the timeout")
    assert time.monotonic() - t0 >= 59, "FAILED before create_timeout"
    g = api.group(cid, "w")
    assert g["status_reason"].startswith("timed out after 1 minutes: BLOCKED: quota exceeded")
    wait(lambda: api.status(cid) == "CREATE_FAILED", what="the cluster to fail")
    kept = set(api.live_servers(cid))
    assert len(kept) == 2, "what succeeded is kept"

    api.ok("PUT", "/sim/quotas/default", json={"cores": 100})
    time.sleep(1.0)  # many conductor passes: a FAILED group rests until someone retries
    assert api.group(cid, "w")["status"] == "CREATE_FAILED"
    assert set(api.live_servers(cid)) == kept
    api.resize(cid, 2, "w")  # the retry: repeat the request
    api.wait_settled(cid, 3)
    assert api.group(cid, "w")["status"] == "UPDATE_COMPLETE"
    assert api.status(cid) == "UPDATE_COMPLETE"
    assert kept < set(api.live_servers(cid))
    api.assert_cloud_matches(cid)


def test_upgrade_over_http_replaces_the_nodes_and_completes_only_then(api: Api) -> None:
    """An upgrade really replaces: the group is UPDATE_COMPLETE only once every node
    runs the new image, and the events tell it node by node."""
    cid = api.create("upg", [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": 2},
    ])  # fmt: skip
    api.wait_settled(cid, 3)
    old = api.ids(cid, "w")
    api.ok("POST", "/clustertemplates", 201, json={
        "name": "v41", "coe": "kubernetes", "image_id": "fedora-coreos-41"})  # fmt: skip
    api.ok("POST", f"/clusters/{cid}/actions/upgrade", 202,
           json={"cluster_template": "v41", "nodegroup": "w"})  # fmt: skip
    wait(lambda: api.group(cid, "w")["status"] == "UPDATE_COMPLETE", what="the rollout")
    images = {s["machine_id"]: s["image"] for s in api.servers(cluster=cid)}
    assert not api.ids(cid, "w") & old and len(api.ids(cid, "w")) == 2
    assert {images[n] for n in api.ids(cid, "w")} == {"fedora-coreos-41"}
    g = api.group(cid, "w")
    up = next(c for c in g["conditions"] if c["type"] == "UpToDate")
    assert up["status"] == "True" and g["status_reason"] is None
