"""Helpers for conductor tests through the real HTTP API: a live server with a
fast sim and an embedded conductor, and a small client for what the tests read
(clusters, node groups, nodes, events, the sim cloud's own server list)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from magnumclient.v1 import client as magnum

from shoal.settings import Settings
from tests.support.server import LiveServer, free_port, live_server
from tests.support.waiting import scaled

HEADERS = {"OpenStack-API-Version": "container-infra latest"}
FAST_SIM = {"boot_seconds": 0.3, "delete_seconds": 0.1, "api_latency_ms": 0}
FAST_CONDUCTOR = {"poll_seconds": 0.05, "requeue_seconds": 0.1, "backoff_max_seconds": 0.5}


@contextmanager
def conductor_server(tmp: Path, **sim: Any) -> Iterator[LiveServer]:
    """`shoal serve` in a thread: API + conductor + sim on SQLite in `tmp` (on a port
    chosen first, so that the URL nodes are given to reach shoal is the real one)."""
    settings = Settings.from_env(
        {},
        data_dir=tmp,
        port=free_port(),
        sim={**FAST_SIM, **sim},
        conductor_settings=FAST_CONDUCTOR,
    )
    with live_server(settings) as srv:
        yield srv


def wait(check: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + scaled(timeout)  # stretched on a loaded machine
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Api:
    """httpx on /v1 and python-magnumclient on the same server, as an admin of project
    `default` (the tests look at the sim cloud's servers too)."""

    def __init__(self, server: LiveServer) -> None:
        token = server.token("default", "admin")
        headers = {**HEADERS, "X-Auth-Token": token}
        self.http = httpx.Client(base_url=server.v1, headers=headers, timeout=30)
        self.mc = magnum.Client(auth_token=token, magnum_url=server.v1, api_version="latest")

    def ok(self, method: str, path: str, status: int = 200, **kw: Any) -> Any:
        r = self.http.request(method, path, **kw)
        assert r.status_code == status, f"{method} {path}: {r.status_code} {r.text}"
        return r.json() if r.content else None

    def create(self, name: str, groups: list[dict[str, Any]], **attrs: Any) -> str:
        body = {"name": name, "image_id": "fedora-coreos-40", "node_groups": groups, **attrs}
        return str(self.ok("POST", "/clusters", 202, json=body)["uuid"])

    def cluster(self, cid: str) -> dict[str, Any]:
        return dict(self.ok("GET", f"/clusters/{cid}"))

    def status(self, cid: str) -> str:
        r = self.http.get(f"/clusters/{cid}")
        return "GONE" if r.status_code == 404 else str(r.json()["status"])

    def group(self, cid: str, name: str) -> dict[str, Any]:
        return dict(self.ok("GET", f"/clusters/{cid}/nodegroups/{name}"))

    def nodes(self, cid: str, group: str | None = None) -> list[dict[str, Any]]:
        params = {"nodegroup": group} if group else {}
        return list(self.ok("GET", f"/clusters/{cid}/nodes", params=params)["nodes"])

    def ids(self, cid: str, group: str | None = None) -> set[str]:
        return {n["uuid"] for n in self.nodes(cid, group)}

    def servers(self, **params: str) -> list[dict[str, Any]]:
        return list(self.ok("GET", "/sim/servers", params=params)["servers"])

    def live_servers(self, cid: str) -> dict[str, dict[str, Any]]:
        """The cloud's servers of a cluster that are not being deleted, by machine id."""
        return {s["machine_id"]: s for s in self.servers(cluster=cid) if s["state"] != "DELETING"}

    def events(self, cid: str) -> list[dict[str, Any]]:
        return list(self.ok("GET", f"/clusters/{cid}/events")["events"])

    def resize(self, cid: str, count: int, group: str, remove: list[str] | None = None) -> None:
        body: dict[str, Any] = {"node_count": count, "nodegroup": group}
        if remove is not None:
            body["nodes_to_remove"] = remove
        self.ok("POST", f"/clusters/{cid}/actions/resize", 202, json=body)

    def settled(self, cid: str, count: int | None = None) -> Callable[[], bool]:
        """Done when the cluster is *_COMPLETE (with `count` nodes, if given)."""

        def done() -> bool:
            if not self.status(cid).endswith("_COMPLETE"):
                return False
            return count is None or len(self.nodes(cid)) == count

        return done

    def wait_settled(self, cid: str, count: int | None = None, timeout: float = 30) -> None:
        wait(self.settled(cid, count), timeout, f"cluster {cid} to complete")
        c = self.cluster(cid)
        assert c["status"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE"), c["status_reason"]

    def assert_cloud_matches(self, cid: str) -> None:
        """One live machine per node row, same id, name and zone; none other."""
        nodes = {n["uuid"]: n for n in self.nodes(cid)}
        wait(lambda: set(self.live_servers(cid)) == set(nodes), 10, "the cloud to match rows")
        servers = self.live_servers(cid)
        for uid, n in nodes.items():
            assert servers[uid]["name"] == n["name"]
            assert servers[uid]["az"] == n["availability_zone"]
            assert n["state"] == "ACTIVE" and servers[uid]["address"] == n["address"]
