"""Two API processes and two conductors on one PostgreSQL database: concurrent
requests through both APIs on the same cluster stay consistent. Writes to one
cluster are serialized by a row lock on it (services lock cluster -> node group
-> nodes, the conductor in the same order), so racing resizes all apply, one
after the other, and the last one wins; a request that arrives after the
cluster is marked deleting gets 409 in Magnum's error shape; nothing 500s."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.ha_support import (
    Cluster,
    assert_one_machine_per_node,
    deployment,
    get,
    up_conductors,
    wait_for,
)

BODY: dict[str, Any] = {
    "name": "race",
    "image_id": "fedora-coreos-40",
    "flavor_id": "m1.small",
    "master_flavor_id": "m1.small",
    "master_count": 1,
    "node_count": 5,
}
FAST = {"SHOAL_SIM_BOOT_SECONDS": "0.5", "SHOAL_SIM_API_LATENCY_MS": "5"}


def race(dep: Cluster, calls: list[Callable[[httpx.Client], httpx.Response]]) -> list[Any]:
    """Run every call at the same moment, alternating between the two APIs."""
    clients = [dep.client(0), dep.client(1)]
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        r = calls[i](clients[i % 2])
        out[i] = (r.status_code, r.json() if r.content else None)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in clients:
        c.close()
    return out


def resize_chain(c: httpx.Client, cid: str) -> list[tuple[int, int]]:
    """(from, to) of every ResizeRequested event, in commit order."""
    events = get(c, f"/clusters/{cid}/events", limit=1000)["events"]
    chain = []
    for e in events:
        if e["reason"] == "ResizeRequested":
            m = re.search(r"node_count (\d+) -> (\d+)", e["message"])
            assert m, e
            chain.append((int(m.group(1)), int(m.group(2))))
    return chain


@pytest.mark.postgres
@pytest.mark.xdist_group("ha")
def test_two_apis_two_conductors_serialize_conflicting_requests(
    pg_url: str, tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    with deployment(pg_url, tmp_path, **FAST) as dep:
        dep.add_api()
        dep.add_api()
        dep.add_conductor()
        dep.add_conductor()
        with dep.client(0) as a, dep.client(1) as b:
            wait_for(lambda: len(up_conductors(b)) == 2, 30, "two conductors report up")
            r = a.post("/clusters", json=BODY)
            assert r.status_code == 202, r.text
            cid = r.json()["uuid"]
            # Both APIs see the same cluster at once (one database, no cache).
            assert get(b, f"/clusters/{cid}")["uuid"] == cid

            # 1. Twelve resizes of one node group race through both APIs while the
            # conductors work on it: every one applies exactly once, serially.
            counts = list(range(1, 13))
            out = race(dep, [
                lambda c, n=n: c.post(f"/clusters/{cid}/actions/resize", json={"node_count": n})
                for n in counts
            ])  # fmt: skip
            assert [s for s, _ in out] == [202] * len(counts), out
            chain = resize_chain(a, cid)
            assert sorted(to for _, to in chain) == counts, chain
            assert chain[0][0] == 5 and all(
                prev[1] == nxt[0] for prev, nxt in zip(chain, chain[1:], strict=False)
            ), f"a resize did not see the one before it (lost update): {chain}"
            final = chain[-1][1]

            # 2. Ten PATCHes adding different keys of one attribute: none is lost.
            out = race(dep, [
                lambda c, i=i: c.patch(f"/clusters/{cid}", json=[
                    {"op": "add", "path": f"/labels/k{i}", "value": str(i)}])
                for i in range(10)
            ])  # fmt: skip
            assert [s for s, _ in out] == [202] * 10, out
            labels = get(b, f"/clusters/{cid}")["labels"]
            added = {k: x for k, x in labels.items() if k.startswith("k")}
            assert added == {f"k{i}": str(i) for i in range(10)}, labels

            def settled() -> bool:
                cl = get(b, f"/clusters/{cid}")
                assert not cl["status"].endswith("FAILED"), cl
                return bool(cl["status"] == "UPDATE_COMPLETE")

            wait_for(settled, 90, "the cluster settles at the last resize")
            cl = get(a, f"/clusters/{cid}")
            assert cl["node_count"] == final
            servers, nodes = assert_one_machine_per_node(a, cid)
            assert servers == nodes == final + 1

            # 3. A delete races resizes: each resize lands before the delete (202)
            # or is refused after it (409, Magnum's shape); never half of each.
            calls: list[Callable[[httpx.Client], httpx.Response]] = [
                lambda c: c.delete(f"/clusters/{cid}")
            ]
            calls += [
                lambda c, n=n: c.post(f"/clusters/{cid}/actions/resize", json={"node_count": n})
                for n in range(2, 10)
            ]
            out = race(dep, calls)
            assert out[0][0] == 204, out[0]
            statuses = sorted(s for s, _ in out[1:])
            assert set(statuses) <= {202, 409}, out
            for s, body in out[1:]:
                if s == 409:
                    err = body["errors"][0]
                    assert err["status"] == 409 and "being deleted" in err["detail"], body
            record_property("resizes_before_delete", statuses.count(202))
            record_property("resizes_refused_409", statuses.count(409))
            # Deleting, or gone already when the deletes beat a loaded machine's reads.
            cl = b.get(f"/clusters/{cid}")
            assert cl.status_code == 404 or cl.json()["status"] == "DELETE_IN_PROGRESS", cl.text
            groups = a.get(f"/clusters/{cid}/nodegroups")
            if groups.status_code != 404:
                statuses_now = {g["status"] for g in groups.json()["nodegroups"]}
                assert statuses_now <= {"DELETE_IN_PROGRESS"}, groups.text

            def gone() -> bool:
                return all(c.get(f"/clusters/{cid}").status_code == 404 for c in (a, b))

            wait_for(gone, 90, "the deleted cluster answers 404 on both APIs")
            wait_for(
                lambda: get(a, "/sim/servers", cluster=cid)["servers"] == [], 30, "cloud empty"
            )
