"""Crash safety with real processes, through the real API.

A `shoal serve` process (API + embedded conductor, SQLite in a tmp data dir) is
SIGKILLed at random moments while a 200-node cluster is created, resized (with
`nodes_to_remove`) and deleted, and restarted on the same data dir each time.
Desired state is written only over HTTP. After each phase the cluster must
converge with zero duplicate and zero orphaned machines, counted from the
cloud's side (`/v1/sim/servers`) against shoal's node rows (`/v1/clusters/{id}/nodes`).

The sim cloud is slow while the kills happen (so every kill lands while the
operation is in progress); then its clock is sped up (`time_scale`, which keeps
simulated time continuous) so that the phase completes quickly.
Set SHOAL_CRASH_SEED to replay a run; the seed is printed. The waits follow progress
(tests/support/waiting.py): on a loaded machine a phase may take minutes, and only a
phase whose cloud and node rows stop changing fails.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import Server
from tests.support.server import free_port
from tests.support.waiting import until

ENV = {
    "SHOAL_SIM_BOOT_SECONDS": "30",
    "SHOAL_SIM_DELETE_SECONDS": "20",
    "SHOAL_SIM_API_LATENCY_MS": "100",
    "SHOAL_SIM_JITTER": "0.5",
    "SHOAL_SIM_TIME_SCALE": "1",
    "SHOAL_CONDUCTOR_DRIVER_CONCURRENCY": "4",
    "SHOAL_CONDUCTOR_LEASE_SECONDS": "2",
    "SHOAL_CONDUCTOR_POLL_SECONDS": "0.1",
    "SHOAL_CONDUCTOR_REQUEUE_SECONDS": "0.3",
    "SHOAL_CONDUCTOR_BACKOFF_MAX_SECONDS": "1",
    "SHOAL_CONDUCTOR_SWEEP_SECONDS": "1",
}
KILLS = {"create": 7, "resize": 7, "delete": 6}
FAST = 300.0  # time_scale once the kills of a phase are done


def storm(srv: Server, rng: random.Random, count: int, busy: Callable[[], bool]) -> int:
    """Kill `count` times at random moments while `busy()`; restart each time."""
    hits = 0
    for _ in range(count):
        time.sleep(rng.uniform(0.0, 1.2))
        assert busy(), "the operation finished before the kill: slow the sim down"
        states = Counter(s["state"] for s in srv.get("/sim/servers")["servers"])
        print(f"kill {srv.kills + 1}: cloud {dict(states)}")
        srv.kill()
        hits += 1
        srv.start()
    return hits


def observed(srv: Server) -> tuple[Any, ...]:
    """What a converging phase changes: the cloud's machines by state, and shoal's node
    rows and statuses by group (a progress snapshot for `until`)."""
    servers = Counter(s["state"] for s in srv.get("/sim/servers")["servers"])
    clusters = srv.get("/clusters")["clusters"]
    rows: Counter[tuple[str, str]] = Counter()
    for c in clusters:
        r = srv.http.get(f"/clusters/{c['uuid']}/nodes")  # 404 once a delete finishes
        rows.update((n["nodegroup_name"], n["state"]) for n in r.json().get("nodes", []))
    return (
        tuple(sorted(servers.items())),
        tuple(sorted((c["uuid"], c["status"]) for c in clusters)),
        tuple(sorted(rows.items())),
    )


def wait_for(srv: Server, done: Callable[[], bool], idle: float, what: str) -> None:
    """`done()` within `idle` seconds of the last change the cloud or shoal shows."""
    until(done, progress=lambda: observed(srv), what=what, idle=idle, interval=0.5)


def check_cloud_matches_rows(srv: Server, cid: str) -> list[dict[str, Any]]:
    """0 duplicates and 0 orphans, from both sides; returns the node rows."""

    def deletes_done() -> bool:
        return all(s["state"] != "DELETING" for s in srv.get("/sim/servers")["servers"])

    wait_for(srv, deletes_done, 20, "machine deletes to finish")
    servers = srv.get("/sim/servers", cluster=cid)["servers"]
    nodes = srv.get(f"/clusters/{cid}/nodes")["nodes"]
    ids = Counter(s["machine_id"] for s in servers)
    names = Counter(s["name"] for s in servers)
    assert [k for k, v in ids.items() if v > 1] == [], "two machines for one node id"
    assert [k for k, v in names.items() if v > 1] == [], "two machines with one name"
    rows = {n["uuid"] for n in nodes}
    assert sorted(set(ids) - rows) == [], "orphans: machines no node row owns"
    assert sorted(rows - set(ids)) == [], "orphans: node rows without a machine"
    assert len({n["name"] for n in nodes}) == len(nodes), "two node rows with one name"
    assert all(n["state"] == "ACTIVE" and n["address"] for n in nodes)
    assert all(s["state"] == "ACTIVE" for s in servers)
    by_id = {s["machine_id"]: s for s in servers}
    assert all(by_id[n["uuid"]]["name"] == n["name"] for n in nodes)
    return list(nodes)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    port = free_port()
    env.update(ENV, SHOAL_DATA_DIR=str(tmp_path), SHOAL_HOST="127.0.0.1", SHOAL_PORT=str(port))
    srv = Server(env, port, tmp_path / "serve.log")
    try:
        yield srv
    finally:
        srv.kill()
        srv.http.close()


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a cap only: each wait fails sooner when progress stops
def test_sigkilled_serve_converges_without_duplicates_or_orphans(server: Server) -> None:
    srv = server
    seed = int(os.environ.get("SHOAL_CRASH_SEED") or time.time_ns() % 1_000_000)
    print(f"crash test seed: {seed} (SHOAL_CRASH_SEED={seed} replays the kill moments)")
    rng = random.Random(seed)
    srv.start()

    def slow() -> None:
        assert srv.http.patch("/sim/config", json={"time_scale": 1}).status_code == 200

    def fast() -> None:
        assert srv.http.patch("/sim/config", json={"time_scale": FAST}).status_code == 200

    def status() -> str:
        r = srv.http.get(f"/clusters/{cid}")
        return "GONE" if r.status_code == 404 else str(r.json()["status"])

    def busy() -> bool:
        return status().endswith("IN_PROGRESS")

    def counts_are(want: dict[str, int]) -> Callable[[], bool]:
        def done() -> bool:
            if not status().endswith("_COMPLETE"):
                return False
            got = Counter(n["nodegroup_name"] for n in srv.get(f"/clusters/{cid}/nodes")["nodes"])
            return got == Counter(want)

        return done

    # Create: 3 masters over 3 AZs + 197 workers in two groups = 200 nodes.
    body = {
        "name": "crash",
        "image_id": "fedora-coreos-40",
        "node_groups": [
            {"name": "masters", "role": "master", "flavor_id": "m1.small", "node_count": 3,
             "availability_zones": ["az-1", "az-2", "az-3"]},
            {"name": "w1", "flavor_id": "m1.small", "node_count": 100,
             "availability_zones": ["az-1", "az-2"]},
            {"name": "w2", "flavor_id": "m1.small", "node_count": 97},
        ],
    }  # fmt: skip
    r = srv.http.post("/clusters", json=body)
    assert r.status_code == 202, r.text
    cid = r.json()["uuid"]
    hits = storm(srv, rng, KILLS["create"], busy)
    fast()
    wait_for(srv, counts_are({"masters": 3, "w1": 100, "w2": 97}), 60, "create")
    assert status() == "CREATE_COMPLETE"
    nodes = check_cloud_matches_rows(srv, cid)

    # Resize: w1 100 -> 60 naming 5 nodes (by name and by server id), w2 97 -> 137.
    slow()
    w1 = [n for n in nodes if n["nodegroup_name"] == "w1"]
    named = [w1[10]["name"], w1[20]["name"], w1[30]["uuid"], w1[40]["uuid"], w1[50]["name"]]
    doomed = {w1[i]["uuid"] for i in (10, 20, 30, 40, 50)}
    r = srv.http.post(
        f"/clusters/{cid}/actions/resize",
        json={"node_count": 60, "nodes_to_remove": named, "nodegroup": "w1"},
    )
    assert r.status_code == 202, r.text
    r = srv.http.post(
        f"/clusters/{cid}/actions/resize", json={"node_count": 137, "nodegroup": "w2"}
    )
    assert r.status_code == 202, r.text
    hits += storm(srv, rng, KILLS["resize"], busy)
    fast()
    wait_for(srv, counts_are({"masters": 3, "w1": 60, "w2": 137}), 60, "resize")
    assert status() == "UPDATE_COMPLETE"
    after = check_cloud_matches_rows(srv, cid)
    kept = {n["uuid"] for n in after}
    assert not doomed & kept, "a named node survived the resize"
    before = {n["uuid"] for n in nodes}
    assert {n["uuid"] for n in nodes if n["nodegroup_name"] != "w1"} <= kept
    assert len(before & kept) == 3 + 60 + 97, "a node that was not named was replaced"

    # Delete: the cloud ends empty and the cluster answers 404.
    slow()
    assert srv.http.delete(f"/clusters/{cid}").status_code == 204
    hits += storm(srv, rng, KILLS["delete"], busy)
    fast()
    wait_for(srv, lambda: status() == "GONE", 60, "delete")
    wait_for(srv, lambda: srv.get("/sim/servers")["servers"] == [], 30, "the cloud to empty")
    assert srv.http.get(f"/clusters/{cid}/nodes").status_code == 404
    assert hits >= 20 and srv.kills >= 20, f"only {hits} kills hit work in progress"
