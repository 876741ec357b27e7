"""Real shoal processes on one PostgreSQL database for the HA tests: API servers
(`shoal serve --no-conductor`) and conductors (`shoal conductor`), started with
a short lease and stopped by their own PIDs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from tests.support.process import admin_headers
from tests.support.server import free_port
from tests.support.waiting import scaled

SHOAL = str(Path(sys.executable).with_name("shoal"))
HEADERS = {"OpenStack-API-Version": "container-infra latest"}
ENV = {
    "SHOAL_SIM_BOOT_SECONDS": "3",
    "SHOAL_SIM_DELETE_SECONDS": "1",
    "SHOAL_SIM_API_LATENCY_MS": "10",
    "SHOAL_SIM_JITTER": "0.3",
    "SHOAL_CONDUCTOR_WORKERS": "4",
    "SHOAL_CONDUCTOR_DRIVER_CONCURRENCY": "8",
    "SHOAL_CONDUCTOR_LEASE_SECONDS": "3",
    "SHOAL_CONDUCTOR_REQUEUE_SECONDS": "0.5",
    "SHOAL_CONDUCTOR_BACKOFF_MAX_SECONDS": "1",
    "SHOAL_CONDUCTOR_SWEEP_SECONDS": "2",
    "SHOAL_QUOTA_CLUSTERS": "1000",
}


@dataclass
class Proc:
    """One shoal process this test started."""

    argv: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    url: str = ""

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send(self, sig: int) -> None:
        """Send `sig` without waiting (SIGSTOP / SIGCONT)."""
        if self.alive():
            os.kill(self.pid, sig)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            assert self.popen is not None
            os.kill(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=20)


@dataclass
class Cluster:
    """The processes of one HA deployment on one database."""

    db_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    apis: list[Proc] = field(default_factory=list)
    conductors: list[Proc] = field(default_factory=list)

    def _start(self, argv: list[str], name: str) -> Proc:
        p = Proc(argv, self.workdir / f"{name}.log")
        with p.log.open("ab") as out:
            p.popen = subprocess.Popen(
                argv, env=self.env, stdout=out, stderr=out, start_new_session=True
            )
        return p

    def add_api(self) -> Proc:
        port = free_port()
        p = self._start([SHOAL, "serve", "--no-conductor", "--port", str(port)], f"api{port}")
        p.url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + scaled(60)
        while True:
            assert p.alive(), p.log.read_text()[-3000:]
            try:
                if httpx.get(p.url, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"API did not start; see {p.log}"
            time.sleep(0.05)
        self.apis.append(p)
        return p

    def add_conductor(self) -> Proc:
        p = self._start([SHOAL, "conductor"], f"conductor{len(self.conductors)}")
        self.conductors.append(p)
        return p

    def stop(self) -> None:
        for p in self.conductors + self.apis:
            p.kill(signal.SIGTERM)

    def client(self, i: int = 0) -> httpx.Client:
        return httpx.Client(base_url=self.apis[i].url, headers=admin_headers(self.env), timeout=60)

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.db_url, autocommit=True) as conn:
            return list(conn.execute(query, args).fetchall())  # type: ignore[call-overload]


@contextmanager
def deployment(db_url: str, workdir: Path, **extra: str) -> Iterator[Cluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update(ENV, SHOAL_DATA_DIR=str(workdir / "data"), SHOAL_DATABASE_URL=db_url, **extra)
    dep = Cluster(db_url, workdir, env)
    try:
        yield dep
    finally:
        dep.stop()


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until `check()` holds; AssertionError naming `what` after `timeout`."""
    t0 = time.monotonic()
    limit = scaled(timeout)  # stretched on a loaded machine
    while not check():
        assert time.monotonic() - t0 < limit, f"timed out after {limit:.0f} s: {what}"
        time.sleep(0.05)
    return time.monotonic() - t0


def get(c: httpx.Client, path: str, **params: Any) -> Any:
    r = c.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def up_conductors(c: httpx.Client) -> list[dict[str, Any]]:
    return [s for s in get(c, "/mservices")["mservices"] if s["state"] == "up"]


def assert_one_machine_per_node(c: httpx.Client, cid: str) -> tuple[int, int]:
    """0 duplicates and 0 orphans between the cloud (sim) and the node rows."""
    servers = [
        s for s in get(c, "/sim/servers", cluster=cid)["servers"] if s["state"] != "DELETING"
    ]
    nodes = get(c, f"/clusters/{cid}/nodes", limit=1000)["nodes"]
    ids = Counter(s["machine_id"] for s in servers)
    dups = sorted(k for k, n in ids.items() if n > 1)
    orphans = sorted(set(ids) - {n["uuid"] for n in nodes})
    missing = sorted({n["uuid"] for n in nodes} - set(ids))
    assert dups == [], f"duplicate machines: {dups}"
    assert orphans == [], f"machines without a node row: {orphans}"
    assert missing == [], f"node rows without a machine: {missing}"
    return len(servers), len(nodes)
