"""A burst of clusters on a real `shoal serve` (SQLite, its embedded conductor, the sim
with no latency): every cluster is complete within seconds of the last POST.

A worker that finds several resources due claims some for the idle workers too and
wakes them. A woken worker whose look found nothing free (those batches are leased, by
this very process) once went back to sleep, so the last clusters of a burst waited
about a minute with every worker idle (conductor/loop.py: `Claims.queued`)."""

from __future__ import annotations

import time

from benchmarks.harness import ZERO_LATENCY, Deployment, check, cluster_body

from tests.support.waiting import scaled

CLUSTERS = 40
BOUND_S = 15.0  # a stranded batch waited 48-50 s; a burst takes about a second


def test_a_burst_of_clusters_completes_without_a_stranded_pass() -> None:
    with Deployment(env_extra=ZERO_LATENCY) as dep, dep.client() as c:
        uids = [
            check(c.post("/clusters", json=cluster_body(f"b{i}", 1, 19, masters=1)), 202)["uuid"]
            for i in range(CLUSTERS)
        ]
        t0, limit = time.monotonic(), scaled(BOUND_S)
        while True:
            listed = check(c.get("/clusters", params={"limit": 1000}), 200)["clusters"]
            done = [x for x in listed if x["status"] == "CREATE_COMPLETE"]
            if len(done) == len(uids):
                break
            late = [x["name"] for x in listed if x["status"] != "CREATE_COMPLETE"]
            assert time.monotonic() - t0 < limit, f"not complete after {limit:.0f} s: {late}"
            time.sleep(0.2)
        print(f"\n{CLUSTERS} clusters complete {time.monotonic() - t0:.2f} s after the last POST")
