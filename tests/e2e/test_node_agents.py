"""Real `shoal-agent` processes, one per node, against a real `shoal serve`: each
reads the identity file its node's bootstrap data writes (node, URL, token),
takes its task with its heartbeat and runs real commands (a config replaces the
node's systemctl with a shell script, as an agent config may). A restart of the
workers' services goes one node at a time; an agent SIGKILLed in the middle of
its task and shoal SIGKILLed in the middle of the operation are both restarted,
and the operation still ends with every node done once, its output kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from tests.support.process import Server, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled

AGENT = str(Path(sys.executable).with_name("shoal-agent"))
# What "restart the services" is on these nodes: a script that counts its runs (a
# restarted agent re-runs a task it had not finished) and then waits for the test to
# open its node's gate (a file), at most 120 s: the test kills things while a task is
# surely under way, however slowly a loaded machine lets it look.
RESTART = (
    "echo restarting {services} on $(cat {dir}/name); echo run >> {dir}/runs; i=0; "
    "while [ ! -e {dir}/gate ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done; echo done"
)


def wait_for(
    done: Callable[[], bool], timeout: float, what: str, story: Callable[[], str] = str
) -> None:
    """Wait for `done`, the timeout stretched by the machine's load (a loaded CI machine
    runs the agents' restarts and shoal's passes slower); `story()` says what was seen."""
    deadline = time.monotonic() + scaled(timeout)
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{story()}"
        time.sleep(0.2)


class Node:
    """One node's agent: its identity file (from its user data), config, process."""

    def __init__(self, root: Path, node: dict[str, Any], user_data: str, log: Path) -> None:
        self.uuid, self.name = node["uuid"], node["name"]
        self.dir = root / self.name
        self.dir.mkdir(parents=True)
        doc = yaml.safe_load(user_data)
        identity = next(f for f in doc["write_files"] if f["path"].endswith("node.json"))
        assert identity["permissions"] == "0600"
        (self.dir / "node.json").write_text(identity["content"])
        (self.dir / "name").write_text(self.name)
        script = RESTART.replace("{dir}", str(self.dir))
        config = {"interval": 0.5, "commands": {"restart-services": [["sh", "-c", script]]}}
        (self.dir / "agent.json").write_text(json.dumps(config))
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [
            AGENT, "--identity", str(self.dir / "node.json"), "--config",
            str(self.dir / "agent.json"), "--state-dir", str(self.dir / "state"),
            "--services", str(self.dir / "services.json"),  # none: not the host's own
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the agent and the command it runs (its own process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def open_gate(self) -> None:
        """Let the node's task end."""
        (self.dir / "gate").touch()

    def runs(self) -> int:
        path = self.dir / "runs"
        return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    env = shoal_env(
        tmp_path / "data",
        SHOAL_PORT=str(port),
        SHOAL_AGENT_INTERVAL_SECONDS="0.5",
        SHOAL_CONDUCTOR_POLL_SECONDS="0.1",
        SHOAL_CONDUCTOR_REQUEUE_SECONDS="0.3",
        SHOAL_CONDUCTOR_LEASE_SECONDS="2",
    )
    srv = Server(env, port, tmp_path / "serve.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.kill()


def test_real_agents_restart_services_node_by_node_through_kills(
    server: Server, tmp_path: Path
) -> None:
    groups = [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": 3},
    ]
    body = {"name": "agents", "image_id": "fedora-coreos-40", "node_groups": groups}
    cid = server.http.post("/clusters", json=body).json()["uuid"]
    wait_for(lambda: server.get(f"/clusters/{cid}")["status"] == "CREATE_COMPLETE", 120, "create")
    world = SimWorld.open(f"sqlite:///{tmp_path / 'data' / 'sim.db'}", SimSettings())
    try:
        workers = server.get(f"/clusters/{cid}/nodes", nodegroup="w")["nodes"]
        nodes = [
            Node(tmp_path / "nodes", n, world.user_data(n["uuid"]) or "", tmp_path / "agents.log")
            for n in workers
        ]
    finally:
        world.close()
    for n in nodes:
        n.start()
    try:

        def heard() -> bool:
            listed = server.get(f"/clusters/{cid}/nodes", nodegroup="w")["nodes"]
            return all(n["agent_seen_at"] for n in listed)

        wait_for(heard, 60, "every agent's first heartbeat")
        start = {"kind": "restart-services", "nodegroup": "w", "params": {"services": "kubelet"}}
        r = server.http.post(f"/clusters/{cid}/operations", json=start)
        assert r.status_code == 202, r.text
        (uuid,) = r.json()["operations"]
        path = f"/clusters/{cid}/operations/{uuid}"

        def running_node() -> Node | None:
            tasks = server.get(path)["tasks"]
            busy = [t["node_id"] for t in tasks if t["state"] == "RUNNING"]
            assert len(busy) <= 1, "two nodes restarting at once"
            return next((n for n in nodes if n.uuid in busy), None)

        def story() -> str:
            """The operation, the group's nodes and events, and the server's log's end."""
            nodes_now = server.get(f"/clusters/{cid}/nodes", nodegroup="w")["nodes"]
            events = server.get(f"/clusters/{cid}/events").get("events", [])[-15:]
            log = server.log.read_text(errors="replace")[-4000:]
            return "\n".join(
                [json.dumps(server.get(path), indent=1), json.dumps(nodes_now, indent=1),
                 json.dumps(events, indent=1), log]
            )  # fmt: skip

        def mid_task() -> bool:
            node = running_node()
            return node is not None and node.runs() == 1

        # The first node's agent dies in the middle of its task and comes back.
        wait_for(mid_task, 60, "the first node's task to run", story)
        victim = running_node()
        assert victim is not None
        victim.kill()
        victim.start()
        victim.open_gate()
        # shoal dies while the second node's task runs, and comes back.
        first_done = lambda: server.get(path)["progress"].startswith("1 of")  # noqa: E731
        wait_for(first_done, 60, "the first node", story)
        wait_for(lambda: running_node() is not None, 60, "the second node's turn", story)
        server.kill()
        time.sleep(1)
        server.start()
        for n in nodes:
            n.open_gate()
        wait_for(lambda: server.get(path)["state"] != "RUNNING", 120, "the operation to end", story)
        op = server.get(path)
        assert op["state"] == "SUCCEEDED", json.dumps(op, indent=1)
        assert [t["state"] for t in op["tasks"]] == ["SUCCEEDED"] * 3
        output = {t["node_id"]: t["output"] for t in op["tasks"]}
        for n in nodes:
            assert f"restarting kubelet on {n.name}" in output[n.uuid]
            assert output[n.uuid].rstrip().endswith("done")
        assert victim.runs() == 2  # re-run after the kill: the task kinds are idempotent
        assert sorted(n.runs() for n in nodes if n is not victim) == [1, 1]
        tasks = sorted(op["tasks"], key=lambda t: t["started_at"])
        for before, after in zip(tasks, tasks[1:], strict=False):
            assert before["finished_at"] <= after["started_at"], "two nodes at once"
    finally:
        for n in nodes:
            n.stop()
