"""The management plane moves: `shoal export` from one deployment and `shoal import`
into a fresh one (its own data directory and database, the same cloud and secret
key), real processes: the new deployment adopts every machine (0 recreated, 0
deleted), serves the same clusters, nodes and CA, and refuses a second import, an
export sealed with another key, and a file that is not an export."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port

LATEST = {"OpenStack-API-Version": "container-infra latest"}


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SHOAL, *argv], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)


def test_a_fresh_deployment_imports_the_clusters_and_recreates_no_machine(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    env_a = shoal_env(a, SHOAL_SIM_TIME_SCALE="50")
    vms = [{"id": i, "cpu": 1, "ram": 2} for i in range(3)]
    body = {
        "name": "edge", "image_id": "fedora-coreos-40", "flavor_id": "m1.small",
        "node_groups": [
            {"name": "m", "role": "master", "provider": "vms", "node_count": 3},
            {"name": "w", "node_count": 2},
            {"name": "hosts", "role": "virt", "flavor_id": "bm.large", "node_count": 1,
             "vms": vms},
        ],
    }  # fmt: skip
    port = free_port()
    with serving(env_a, port, tmp_path / "a.log"):
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(env_a), timeout=30
        )
        # A cluster template that references a standalone node group template.
        gpu = c.post("/nodegrouptemplates", json={"name": "gpu", "role": "gpu"}).json()
        ref = {"nodegroup_template_id": "gpu", "node_count": 2}
        shape = {"name": "shape", "coe": "kubernetes", "image_id": "fedora-coreos-40",
                 "node_group_templates": [{"name": "cp", "role": "master"}, ref]}  # fmt: skip
        assert c.post("/clustertemplates", json=shape).status_code == 201
        assert c.post("/clusters", json=body).status_code == 202
        wait(lambda: c.get("/clusters/edge").json()["status"] == "CREATE_COMPLETE", 120, "create")
        ca = c.get("/certificates/edge").json()["pem"]
        before = {s["machine_id"]: s for s in c.get("/sim/servers").json()["servers"]}
        nodes_a = {n["uuid"]: n for n in c.get("/clusters/edge/nodes").json()["nodes"]}
    assert set(before) == set(nodes_a) and len(before) == 6

    exported = tmp_path / "edge.json"
    done = run(env_a, "export", "-o", str(exported))
    assert done.returncode == 0, done.stderr
    assert "exported 1 cluster(s)" in done.stderr and oct(exported.stat().st_mode)[-3:] == "600"
    doc = json.loads(exported.read_text())
    assert "PRIVATE KEY" not in exported.read_text()  # the CA key travels sealed

    # A fresh deployment on the same cloud (the sim world is the cloud) and key.
    env_b = shoal_env(
        b,
        SHOAL_SIM_TIME_SCALE="50",
        SHOAL_SIM_DATABASE_URL=f"sqlite:///{a / 'sim.db'}",
        SHOAL_SECRET_KEY_FILE=str(a / "secret.key"),
    )
    done = run(env_b, "import", str(exported))
    assert done.returncode == 0, done.stderr
    assert "imported 1 cluster(s)" in done.stdout

    again = run(env_b, "import", str(exported))
    assert again.returncode == 1 and "exists here already: nothing imported" in again.stderr
    other = shoal_env(tmp_path / "c", SHOAL_SIM_DATABASE_URL=f"sqlite:///{a / 'sim.db'}")
    refused = run(other, "import", str(exported))
    assert refused.returncode == 1 and "sealed with secret key" in refused.stderr
    bogus = tmp_path / "bogus.json"
    bogus.write_text(json.dumps({"format": "something-else"}))
    assert "not a shoal export" in run(other, "import", str(bogus)).stderr
    assert "Traceback" not in refused.stderr + again.stderr

    port = free_port()
    with serving(env_b, port, tmp_path / "b.log"):
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(env_b), timeout=30
        )
        cluster = c.get("/clusters/edge").json()
        assert cluster["uuid"] == doc["tables"]["clusters"][0]["uuid"]
        time.sleep(2)  # the conductor's passes over every group
        wait(lambda: c.get("/clusters/edge").json()["status"].endswith("COMPLETE"), 60, "settle")
        after = {s["machine_id"]: s for s in c.get("/sim/servers").json()["servers"]}
        assert set(after) == set(before), "a machine was recreated or deleted"
        # the same machines, not new ones under the same ids: born when they were, where
        # they were, with the addresses they had
        same = ("created_at", "address", "az", "name")
        assert {m: [s[k] for k in same] for m, s in after.items()} == {
            m: [s[k] for k in same] for m, s in before.items()
        }
        assert all(s["state"] == "ACTIVE" for s in after.values())
        nodes_b = {n["uuid"]: n for n in c.get("/clusters/edge/nodes").json()["nodes"]}
        assert set(nodes_b) == set(nodes_a)
        assert {n["vm"] for n in nodes_b.values() if n["vm"]} == {"0", "1", "2"}
        assert c.get("/certificates/edge").json()["pem"] == ca
        entry = c.get("/clustertemplates/shape").json()["node_group_templates"][1]
        assert entry["nodegroup_template_id"] == gpu["uuid"] and entry["node_count"] == 2
        assert c.delete("/nodegrouptemplates/gpu").status_code == 409  # still referenced
        reasons = [e["reason"] for e in c.get("/clusters/edge/events").json()["events"]]
        assert "Imported" in reasons and "CreateComplete" in reasons  # history came along
        assert "MachineAdopted" not in reasons  # the rows came with their machines
