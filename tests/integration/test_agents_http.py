"""Node agents over the real HTTP API: the sim's emulated agents run the real agent
loop (`shoal.agent`) with each node's own identity and token from its bootstrap
data. An operation goes node by node with each node's output; an in-place
upgrade rebases the nodes through their agents keeping the machines; the
agent API refuses a node that is not who it says; the CLI starts and follows an
operation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.agent import protocol
from shoal.drivers.sim.agents import identity_of
from tests.integration.cli_support import Shoal
from tests.integration.conductor_http_support import Api, conductor_server, wait
from tests.support.server import LiveServer

GROUPS = [
    {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
    {"name": "w", "flavor_id": "m1.small", "node_count": 3},
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with conductor_server(tmp_path, agents=True) as srv:
        yield srv


def ready(api: Api, **attrs: Any) -> str:
    cid = api.create("agents", GROUPS, **attrs)
    wait(lambda: api.status(cid) == "CREATE_COMPLETE", 60, "the cluster")
    wait(lambda: all(n["agent_seen_at"] for n in api.nodes(cid)), 30, "every agent's heartbeat")
    return cid


def finished(api: Api, cid: str, uuid: str) -> dict[str, Any]:
    path = f"/clusters/{cid}/operations/{uuid}"
    wait(lambda: api.ok("GET", path)["state"] != "RUNNING", 90, "the operation")
    return dict(api.ok("GET", path))


def token_of(server: LiveServer, node: str) -> str:
    identity = identity_of(server.runtime.sim.user_data(node) or "")
    assert identity is not None, "the node's bootstrap data carries no agent identity"
    return identity["agent_token"]


def test_an_operation_runs_node_by_node_through_the_agents(server: LiveServer) -> None:
    api = Api(server)
    cid = ready(api)
    body = {"kind": "restart-services", "nodegroup": "w", "params": {"services": "kubelet,crio"}}
    (uuid,) = api.ok("POST", f"/clusters/{cid}/operations", 202, json=body)["operations"]
    op = finished(api, cid, uuid)
    assert op["state"] == "SUCCEEDED", op
    assert op["progress"] == "3 of 3 node(s) done"
    tasks = op["tasks"]
    assert [t["state"] for t in tasks] == ["SUCCEEDED"] * 3
    for t in tasks:
        assert "$ systemctl restart kubelet" in t["output"]
        assert "$ systemctl restart crio" in t["output"] and t["exit_code"] == 0
    for before, after in zip(tasks, tasks[1:], strict=False):  # one at a time
        assert before["finished_at"] <= after["started_at"]
    group = api.group(cid, "w")
    assert group["health_status"] == "HEALTHY"
    listed = api.ok("GET", f"/clusters/{cid}/operations")["operations"]
    assert [o["uuid"] for o in listed] == [uuid] and "tasks" not in listed[0]
    # A second operation: bad input is a 400 naming the field and starts nothing.
    bad = api.http.post(f"/clusters/{cid}/operations", json={"kind": "reboot", "batch_size": 0})
    assert bad.status_code == 400 and "batch_size" in bad.json()["errors"][0]["detail"]
    assert len(api.ok("GET", f"/clusters/{cid}/operations")["operations"]) == 1


def test_the_agent_api_knows_each_node_by_its_own_token(server: LiveServer) -> None:
    api = Api(server)
    cid = ready(api)
    a, b = (n["uuid"] for n in api.nodes(cid, "w")[:2])
    agent = httpx.Client(base_url=server.v1, timeout=30)
    beat = {"node": b, "version": "1", "task": None}
    cases = {
        "no token": {},
        "another node's token": {protocol.TOKEN_HEADER: token_of(server, a)},
        "a made-up token": {protocol.TOKEN_HEADER: "x" * 43},
    }
    for what, headers in cases.items():
        r = agent.post("/agent/heartbeat", json=beat, headers=headers)
        assert r.status_code == 401, what
        assert "token" in r.json()["errors"][0]["detail"]
    ok = agent.post(
        "/agent/heartbeat", json=beat, headers={protocol.TOKEN_HEADER: token_of(server, b)}
    )
    assert ok.status_code == 200 and ok.json() == {"interval": 10.0, "task": None}
    # A task of node b cannot be reported with node a's token.
    body = {"kind": "restart-services", "nodegroup": "w", "nodes": [b]}
    api.ok("POST", f"/clusters/{cid}/operations", 202, json=body)
    (op,) = api.ok("GET", f"/clusters/{cid}/operations")["operations"]
    finished(api, cid, op["uuid"])
    task = api.ok("GET", f"/clusters/{cid}/operations/{op['uuid']}")["tasks"][0]
    forged = agent.post(
        f"/agent/tasks/{task['uuid']}",
        json={"state": "FAILED", "output": "forged"},
        headers={protocol.TOKEN_HEADER: token_of(server, a)},
    )
    assert forged.status_code == 401
    assert (
        api.ok("GET", f"/clusters/{cid}/operations/{op['uuid']}")["tasks"][0]["output"] != "forged"
    )


def test_an_in_place_upgrade_rebases_every_node_keeping_the_machines(server: LiveServer) -> None:
    api = Api(server)
    labels = {"upgrade_strategy": "in-place", "ostree_ref": "fedora:fedora/x86_64/coreos/next"}
    cid = ready(api, labels=labels)
    machines = {s["machine_id"] for s in api.servers(cluster=cid)}
    patch = [{"op": "replace", "path": "/image_id", "value": "fedora-coreos-41"}]
    api.ok("PATCH", f"/clusters/{cid}/nodegroups/w", 202, json=patch)
    wait(lambda: api.group(cid, "w")["status"] == "UPDATE_COMPLETE", 90, "the in-place upgrade")
    assert {s["machine_id"] for s in api.servers(cluster=cid)} == machines
    workers = api.nodes(cid, "w")
    assert {n["image_id"] for n in workers} == {"fedora-coreos-41"}
    (op,) = api.ok("GET", f"/clusters/{cid}/operations")["operations"]
    assert op["kind"] == "rebase" and op["state"] == "SUCCEEDED"
    detail = api.ok("GET", f"/clusters/{cid}/operations/{op['uuid']}")
    assert all(
        "$ rpm-ostree rebase fedora:fedora/x86_64/coreos/next" in t["output"]
        for t in detail["tasks"]
    )


def test_changing_node_labels_tells_the_agents(server: LiveServer) -> None:
    api = Api(server)
    cid = ready(api)
    patch = [{"op": "replace", "path": "/node_labels", "value": {"disk": "ssd"}}]
    api.ok("PATCH", f"/clusters/{cid}/nodegroups/w", 202, json=patch)
    wait(
        lambda: bool(api.ok("GET", f"/clusters/{cid}/operations")["operations"]), 30, "an operation"
    )
    (op,) = api.ok("GET", f"/clusters/{cid}/operations")["operations"]
    assert op["kind"] == "set-labels" and op["params"]["labels"] == {"disk": "ssd"}
    assert finished(api, cid, op["uuid"])["state"] == "SUCCEEDED"


def test_the_cli_starts_an_operation_and_waits_for_it(server: LiveServer) -> None:
    api = Api(server)
    cid = ready(api)
    shoal = Shoal(server)
    out = shoal.run("operation", "start", cid, "reboot", "-g", "w", "--batch-size", "2", "--wait")
    assert out.exit_code == 0, out.output
    assert "reboot on" in out.stderr and "SUCCEEDED, 3 of 3 node(s) done" in out.stderr
    uuid = out.stdout.strip()
    shown = shoal.json("operation", "show", cid, uuid)
    assert shown["state"] == "SUCCEEDED" and len(shown["tasks"]) == 3
    bad = shoal.run("operation", "start", cid, "reformat", "-g", "w")
    assert bad.exit_code == 1 and "kind must be one of" in bad.stderr
    bad = shoal.run("operation", "start", cid, "reboot", "-p", "oops")
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.stderr


def test_a_node_whose_image_lacks_programs_fails_its_group_saying_which(
    server: LiveServer,
) -> None:
    api = Api(server)
    cid = ready(api)
    node = api.nodes(cid, "w")[0]
    agent = httpx.Client(base_url=server.v1, timeout=30)
    headers = {protocol.TOKEN_HEADER: token_of(server, node["uuid"])}
    services = [
        {"name": "containerd", "state": "running", "message": ""},
        {"name": "kubelet", "state": "missing", "message": "kubelet is not on this node"},
    ]
    beat = {"node": node["uuid"], "version": "1", "task": None, "services": services}

    def says_what_is_missing() -> bool:
        # The node's emulated agent beats too (every second, all running): this beat is
        # repeated until the group and the node are seen saying what is missing.
        assert agent.post("/agent/heartbeat", json=beat, headers=headers).status_code == 200
        reason = api.group(cid, "w")["status_reason"] or ""
        (mine,) = [n for n in api.nodes(cid, "w") if n["uuid"] == node["uuid"]]
        said = [reason, mine["reason"] or ""]
        return node["name"] in reason and all("lacks kubelet" in r for r in said)

    wait(says_what_is_missing, 30, "the group's and the node's reason naming the program")
    assert api.group(cid, "w")["status"] == "CREATE_FAILED"
    assert api.status(cid) == "CREATE_FAILED"
    # The program found (the image fixed): the next heartbeat clears the node's reason;
    # the failed group waits for a retry, as any failed group does.
    fixed = {**beat, "services": [{**services[1], "state": "running"}]}
    assert agent.post("/agent/heartbeat", json=fixed, headers=headers).status_code == 200
    (mine,) = [n for n in api.nodes(cid, "w") if n["uuid"] == node["uuid"]]
    assert not mine["reason"]
