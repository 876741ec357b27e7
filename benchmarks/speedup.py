"""Issue 6: the conductor-count speedup on PostgreSQL (1, 2, 4 conductors).

A multi-cluster create on the sim where each conductor process is the
bottleneck: every cloud call takes `latency_ms` and one process makes at most
`concurrency` calls at a time, so a single conductor is latency-bound and more
conductors (sharing node groups through leases, SKIP LOCKED claims and
NOTIFY wake-ups) finish sooner. The machine's CPU is not the limit: the sim
work per node is small next to its latency.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import psycopg

from benchmarks.harness import ZERO_LATENCY, Deployment, check, cluster_body, wait_status
from benchmarks.scenarios import Row

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"


@dataclass(frozen=True)
class Workload:
    clusters: int
    per_cluster: int  # nodes: 1 master + (per_cluster - 1) workers
    latency_ms: float = 100.0
    concurrency: int = 2  # SHOAL_CONDUCTOR_DRIVER_CONCURRENCY per process
    boot_s: float = 1.0

    def env(self) -> dict[str, str]:
        return {
            **ZERO_LATENCY,
            "SHOAL_SIM_API_LATENCY_MS": f"{self.latency_ms:g}",
            "SHOAL_SIM_JITTER": "0.2",
            "SHOAL_SIM_BOOT_SECONDS": f"{self.boot_s:g}",
            "SHOAL_SIM_DELETE_SECONDS": "0",
            "SHOAL_CONDUCTOR_DRIVER_CONCURRENCY": str(self.concurrency),
            "SHOAL_CONDUCTOR_WORKERS": "4",
            "SHOAL_CONDUCTOR_REQUEUE_SECONDS": "0.5",
        }


def conductor_run(database_url: str, conductors: int, w: Workload) -> Row:
    """Create `w.clusters` clusters through the API; wall time to all CREATE_COMPLETE."""
    with (
        Deployment(env_extra=w.env(), conductors=conductors, database_url=database_url) as dep,
        dep.client() as c,
    ):
        deadline = time.monotonic() + 120
        while sum(s["state"] == "up" for s in check(c.get("/mservices"), 200)["mservices"]) < (
            conductors
        ):  # measure the work, not the processes' start-up
            if time.monotonic() > deadline:
                raise RuntimeError(f"{conductors} conductors did not report up")
            time.sleep(0.1)
        t0 = time.monotonic()
        uids = [
            check(
                c.post("/clusters", json=cluster_body(f"s{i}", 1, w.per_cluster - 1, masters=1)),
                202,
            )["uuid"]
            for i in range(w.clusters)
        ]
        wait_status(c, uids, "CREATE_COMPLETE", timeout=900, poll=0.1)
        wall = time.monotonic() - t0
    return Row(f"{conductors} conductor(s)", w.clusters * w.per_cluster, wall)


def pg_speedup(counts: list[int], w: Workload) -> list[Row]:
    """One throwaway PostgreSQL database per conductor count; speedup vs the first."""
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        return [Row("conductor speedup", 0, 0, note=f"skipped: PostgreSQL unreachable ({exc})")]
    rows: list[Row] = []
    try:
        for k in counts:
            name = f"shoal_bench_{uuid.uuid4().hex[:12]}"
            admin.execute(f'CREATE DATABASE "{name}"')
            try:
                url = f"postgresql://postgres@127.0.0.1:5432/{name}"
                rows.append(conductor_run(url, k, w))
            finally:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()
    for r in rows:
        r.note = (
            f"speedup x{rows[0].wall_s / r.wall_s:.2f}; {w.clusters} clusters x "
            f"{w.per_cluster}, {w.latency_ms:g} ms/call, {w.concurrency} calls/process"
        )
    return rows
