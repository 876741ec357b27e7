"""Failover with real processes on PostgreSQL: three `shoal conductor` processes
and one `shoal serve --no-conductor` create a 300-node cluster; the conductor
holding a node group lease is SIGKILLed mid-create. Another conductor takes its
work over once the lease (3 s here) expires, the cluster completes, the cloud
and the node rows match one to one, and mservices reports the dead one down."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.ha_support import (
    Proc,
    assert_one_machine_per_node,
    deployment,
    get,
    up_conductors,
    wait_for,
)
from tests.support.waiting import scaled

LEASE_S = 3.0
LIVE_LEASES = (
    "SELECT resource, holder, extract(epoch FROM expires_at - (now() AT TIME ZONE 'UTC')) "
    "FROM leases"
)
AZS = ["az-1", "az-2", "az-3"]
BODY: dict[str, Any] = {
    "name": "big",
    "image_id": "fedora-coreos-40",
    "flavor_id": "m1.small",
    "master_flavor_id": "m1.small",
    "create_timeout": 30,
    "node_groups": [
        {"name": "masters", "role": "master", "node_count": 3, "availability_zones": AZS},
        *({"name": f"w{i}", "role": "worker", "node_count": 99, "availability_zones": AZS}
          for i in range(3)),
    ],
}  # fmt: skip


def pid_of(holder: str) -> int:
    """Lease holders are "<host>:<pid>:<pid>:<random>" (see Conductor.holder)."""
    return int(holder.split(":")[-2])


@pytest.mark.postgres
@pytest.mark.xdist_group("ha")
def test_sigkill_a_conductor_mid_create_another_takes_over(
    pg_url: str, tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    with deployment(pg_url, tmp_path) as dep:
        dep.add_api()
        by_pid: dict[int, Proc] = {}
        for _ in range(3):
            p = dep.add_conductor()
            by_pid[p.pid] = p
        with dep.client() as c:
            wait_for(lambda: len(up_conductors(c)) == 3, 30, "three conductors report up")
            r = c.post("/clusters", json=BODY)
            assert r.status_code == 202, r.text
            cid = r.json()["uuid"]
            t_create = time.monotonic()
            holders: Counter[int] = Counter()  # node group lease sightings per conductor

            def sample() -> list[tuple[str, str]]:
                rows = dep.sql("SELECT resource, holder FROM leases")
                holders.update(pid_of(h) for res, h in rows if res.startswith("nodegroup:"))
                return [(res, h) for res, h in rows]

            def active() -> int:
                return int(dep.sql("SELECT count(*) FROM nodes WHERE state = 'ACTIVE'")[0][0])

            # Mid-create (not all nodes active yet): freeze a conductor that
            # holds a node group lease (SIGSTOP, so it cannot let go), then kill it.
            victim: Proc | None = None
            held: list[str] = []
            deadline = time.monotonic() + scaled(60)
            while victim is None:
                assert time.monotonic() < deadline, "never caught a conductor holding a lease"
                rows = sample()
                busy = [h for res, h in rows if res.startswith("nodegroup:")]
                if busy and 30 <= active() < 200:
                    candidate = by_pid[pid_of(busy[0])]
                    candidate.send(signal.SIGSTOP)  # freeze first: its leases stay put
                    held = [
                        res for res, h, left in dep.sql(LIVE_LEASES) if h == busy[0] and left > 0
                    ]
                    if held:
                        victim = candidate
                        victim.kill(signal.SIGKILL)
                    else:
                        candidate.send(signal.SIGCONT)
                time.sleep(0.01)
            nodes_at_kill = active()
            resources = tuple(held)

            def taken_over() -> bool:
                sample()
                rows = dep.sql(
                    "SELECT holder FROM leases WHERE resource = ANY(%s)", list(resources)
                )
                return all(pid_of(h) != victim.pid for (h,) in rows)

            takeover = wait_for(taken_over, 30, "another conductor takes the dead one's leases")
            print(f"\nSIGKILLed conductor {victim.pid} holding {len(resources)} lease(s) with "
                  f"{nodes_at_kill}/300 nodes active; takeover after {takeover:.2f} s "
                  f"(lease {LEASE_S:g} s)")  # fmt: skip
            record_property("takeover_seconds", round(takeover, 2))
            record_property("nodes_at_kill", nodes_at_kill)
            assert takeover <= LEASE_S + scaled(2.0)  # the lease, then a (loaded) claim

            def complete() -> bool:
                sample()
                st = get(c, f"/clusters/{cid}")["status"]
                assert not st.endswith("FAILED"), get(c, f"/clusters/{cid}")
                return bool(st == "CREATE_COMPLETE")

            wait_for(complete, 120, "the cluster reaches CREATE_COMPLETE")
            total = time.monotonic() - t_create
            record_property("create_seconds", round(total, 1))
            cl = get(c, f"/clusters/{cid}")
            assert (cl["node_count"], cl["master_count"]) == (297, 3)
            servers, nodes = assert_one_machine_per_node(c, cid)
            assert servers == nodes == 300
            states = Counter(n["state"] for n in get(c, f"/clusters/{cid}/nodes")["nodes"])
            assert states == {"ACTIVE": 300}

            # Work was spread: every conductor held node group leases at some point.
            record_property("nodegroup_lease_sightings", dict(holders))
            assert len(holders) == 3, holders

            # mservices: the dead conductor goes down after its heartbeats stop.
            def victim_down() -> bool:
                svc = {s["host"]: s for s in get(c, "/mservices")["mservices"]}
                mine = [s for h, s in svc.items() if h.endswith(f":{victim.pid}")]
                return len(mine) == 1 and mine[0]["state"] == "down"

            wait_for(victim_down, 15, "mservices shows the killed conductor down")
            up = up_conductors(c)
            assert len(up) == 2 and all(s["report_count"] > 0 for s in up)
