"""A node agent that supervises its node's services, against the real HTTP API: its
heartbeat (with each service's state) is accepted, and a restart-services operation naming a
supervised service restarts it through the supervisor (a new process), not systemd."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal.agent import services
from shoal.agent.agent import Agent, Client, Identity
from shoal.drivers.sim.agents import identity_of
from tests.integration.conductor_http_support import Api, conductor_server, wait
from tests.support.server import LiveServer

GROUPS = [
    {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
    {"name": "w", "flavor_id": "m1.small", "node_count": 1},
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with conductor_server(tmp_path / "shoal") as srv:  # no emulated agents: ours is the one
        yield srv


def test_supervised_services_are_reported_and_restarted_through_the_agent(
    server: LiveServer, tmp_path: Path
) -> None:
    api = Api(server)
    cid = api.create("supervised", GROUPS)
    wait(lambda: api.status(cid) == "CREATE_COMPLETE", 60, "the cluster")
    (worker,) = api.nodes(cid, "w")
    identity = identity_of(server.runtime.sim.user_data(worker["uuid"]) or "")
    assert identity is not None
    manifest = services.parse(
        {"version": 1, "services": [{"name": "kubelet-stand-in", "argv": ["sleep", "60"]}]}
    )
    supervisor = services.Supervisor(manifest, tmp_path / "logs")
    client = Client(Identity(worker["uuid"], identity["shoal_url"], identity["agent_token"]))
    agent = Agent(client, tmp_path / "agent", supervisor=supervisor, interval=0.2)
    try:
        supervisor.step()
        wait(lambda: (supervisor.step(), supervisor.state("kubelet-stand-in"))[1] == "running")
        before = supervisor.report()[0]["pid"]
        assert agent.tick() is False  # a heartbeat with the services' states, no task
        wait(lambda: bool(api.nodes(cid, "w")[0]["agent_seen_at"]), 10, "the heartbeat")

        body = {
            "kind": "restart-services",
            "nodegroup": "w",
            "params": {"services": ["kubelet-stand-in"]},
        }
        (uuid,) = api.ok("POST", f"/clusters/{cid}/operations", 202, json=body)["operations"]
        wait(lambda: agent.tick(), 30, "the task")
        path = f"/clusters/{cid}/operations/{uuid}"
        wait(lambda: api.ok("GET", path)["state"] != "RUNNING", 30, "the operation")
        op: dict[str, Any] = api.ok("GET", path)
        assert op["state"] == "SUCCEEDED", op
        (task,) = op["tasks"]
        assert task["output"] == "restarted kubelet-stand-in (supervised by the agent)\n"
        after = supervisor.report()[0]
        assert after["state"] in ("starting", "running") and after["pid"] not in (None, before)
    finally:
        supervisor.close()
