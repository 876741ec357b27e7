"""A restored backup costs no machine: real `shoal serve` processes on one data
directory and one sim cloud. Back up the database (the SQLite file, shoal
stopped), make two more clusters, restore the file, serve with the sweeper at its
boldest (every second, no grace, no breaker): 0 machines deleted, the newer
clusters' machines listed as held (`shoal orphan list`), an admin's; a member
gets 403. `shoal orphan adopt` brings one back with its machines (0 made, 0
deleted, then it scales like any cluster); `shoal orphan delete` has the next
sweep delete the other's."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port

BOLD = {
    "SHOAL_CONDUCTOR_SWEEP_SECONDS": "1",
    "SHOAL_CONDUCTOR_SWEEP_GRACE_SECONDS": "0",
    "SHOAL_CONDUCTOR_SWEEP_BREAKER_SHARE": "1",
}


def run(env: dict[str, str], port: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SHOAL, "--url", f"http://127.0.0.1:{port}", *argv],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def wait(check: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)


def client(env: dict[str, str], port: int) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(env), timeout=30
    )


def make(c: httpx.Client, name: str, workers: int) -> str:
    body = {
        "name": name, "image_id": "fedora-coreos-40", "flavor_id": "m1.small",
        "node_groups": [{"name": "m", "role": "master", "node_count": 1},
                        {"name": "w", "node_count": workers}],
    }  # fmt: skip
    made = c.post("/clusters", json=body)
    assert made.status_code == 202, made.text
    wait(lambda: c.get(f"/clusters/{name}").json()["status"] == "CREATE_COMPLETE", 120, name)
    return str(c.get(f"/clusters/{name}").json()["uuid"])


def servers(c: httpx.Client) -> dict[str, dict[str, Any]]:
    return {s["machine_id"]: s for s in c.get("/sim/servers").json()["servers"]}


def test_a_restored_backup_deletes_nothing_and_adopts_the_newer_cluster(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = shoal_env(data, SHOAL_SIM_TIME_SCALE="50", **BOLD)
    port = free_port()
    with serving(env, port, tmp_path / "1.log"):
        c = client(env, port)
        make(c, "old", 1)
        member = c.post("/tokens", json={"project_id": "default", "role": "member"})
        assert member.status_code == 201, member.text
        member_token = member.json()["token"]
    db = data / "shoal.db"
    shutil.copy(db, tmp_path / "backup.db")  # shoal is stopped: the file is whole
    with serving(env, port, tmp_path / "2.log"):
        c = client(env, port)
        new = make(c, "new", 2)
        stray = make(c, "stray", 1)
        before = servers(c)
        new_machines = {m for m, s in before.items() if s["tags"]["shoal-cluster"] == new}
        stray_machines = {m for m, s in before.items() if s["tags"]["shoal-cluster"] == stray}
        assert len(new_machines) == 3 and len(stray_machines) == 2

    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.db", db)  # the restore: new and stray are unknown

    with serving(env, port, tmp_path / "3.log"):
        c = client(env, port)
        held = lambda: {o["machine_id"]: o for o in c.get("/orphans").json()["orphans"]}  # noqa: E731
        wait(lambda: set(held()) == new_machines | stray_machines, 60, "the newer clusters held")
        first = held()
        # Several sweeps later (each refreshes last_seen), still nothing deleted.
        start = max(o["last_seen"] for o in first.values())
        wait(lambda: min(o["last_seen"] for o in held().values()) > start, 60, "a sweep")
        time.sleep(3)  # three more sweeps at SHOAL_CONDUCTOR_SWEEP_SECONDS=1
        assert servers(c).keys() == before.keys(), "a machine was deleted"
        o = first[sorted(new_machines)[0]]
        assert o["cluster_id"] == new and o["cluster_name"] == "new" and o["fate"] == "held"
        assert o["provider"] == "sim" and o["nodegroup_name"] in ("m", "w")
        assert o["tags"]["shoal-node"] == o["machine_id"] == o["node_id"]
        assert o["first_seen"] and o["age_seconds"] >= 0
        assert c.get("/clusters/new").status_code == 404

        as_member = {"X-Auth-Token": member_token}
        assert c.get("/orphans", headers=as_member).status_code == 403
        refused = c.post("/orphans/adopt", json={"cluster_id": new}, headers=as_member)
        assert refused.status_code == 403 and "errors" in refused.json()
        assert c.delete(f"/orphans/{sorted(new_machines)[0]}", headers=as_member).status_code == 403
        bad = c.post("/orphans/adopt", json={"cluster_id": new, "colour": "red"})
        assert bad.status_code == 400 and "colour" in bad.text

        listed = run(env, port, "orphan", "list", "-f", "json")
        assert listed.returncode == 0, listed.stderr
        assert {x["machine_id"] for x in json.loads(listed.stdout)} == set(first)

        adopted = run(env, port, "orphan", "adopt", new)
        assert adopted.returncode == 0, adopted.stderr
        assert f"({new}) adopted" in adopted.stdout
        again = run(env, port, "orphan", "adopt", new)
        assert again.returncode == 1 and "could not be found" in again.stderr
        wait(lambda: c.get("/clusters/new").json()["status"].endswith("COMPLETE"), 60, "adopted")
        nodes = {n["uuid"] for n in c.get("/clusters/new/nodes").json()["nodes"]}
        assert nodes == new_machines  # its machines, none made anew
        same = ("created_at", "address", "name")
        after = servers(c)
        assert {m: [after[m][k] for k in same] for m in new_machines} == {
            m: [before[m][k] for k in same] for m in new_machines
        }
        reasons = [e["reason"] for e in c.get("/clusters/new/events").json()["events"]]
        assert "Adopted" in reasons and reasons.count("MachineAdopted") == 3

        missing = run(env, port, "orphan", "delete", *sorted(stray_machines), "not-held")
        assert missing.returncode == 1 and "not-held" in missing.stderr
        assert servers(c).keys() == before.keys()
        gone = run(env, port, "orphan", "delete", *sorted(stray_machines))
        assert gone.returncode == 0, gone.stderr
        wait(lambda: not stray_machines & set(servers(c)), 60, "the admin's deletion")
        wait(lambda: not held(), 30, "nothing held any more")
        assert set(servers(c)) == set(before) - stray_machines

        resized = c.post(
            f"/clusters/{new}/actions/resize", json={"node_count": 3, "nodegroup": "w"}
        )
        assert resized.status_code == 202, resized.text
        wait(lambda: len(c.get("/clusters/new/nodes").json()["nodes"]) == 4, 60, "scaled")
        wait(lambda: c.get("/clusters/new").json()["status"].endswith("COMPLETE"), 60, "settle")
        assert new_machines < {n["uuid"] for n in c.get("/clusters/new/nodes").json()["nodes"]}
