"""Run real `shoal serve` / `shoal conductor` processes and drive them over HTTP.

The benchmarks measure shoal the way an operator meets it: a separate server
process, the Magnum API, the sim cloud behind the driver contract. Nothing here
imports shoal's internals.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

SHOAL = str(Path(sys.executable).with_name("shoal"))
HEADERS = {"OpenStack-API-Version": "container-infra latest"}
ZERO_LATENCY = {
    "SHOAL_SIM_BOOT_SECONDS": "0",
    "SHOAL_SIM_DELETE_SECONDS": "0",
    "SHOAL_SIM_API_LATENCY_MS": "0",
    "SHOAL_SIM_JITTER": "0",
    "SHOAL_QUOTA_CLUSTERS": "100000",
}


# Settings the command line gives every shoal process a scenario starts, over the
# scenario's own (`./run bench --api-threads 4`: SHOAL_API_THREADS=4).
SERVER_ENV: dict[str, str] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mb(pid: int) -> float:
    """Peak resident set size of a live process (VmHWM), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Process:
    """One shoal process we started, stopped by its PID only."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def family(self) -> list[psutil.Process]:
        """This process and its children (the sim's, when it runs in its own)."""
        proc = psutil.Process(self.pid)
        return [proc, *proc.children(recursive=True)]

    def cpu_seconds(self) -> float:
        total = 0.0
        for p in self.family():
            with contextlib.suppress(psutil.NoSuchProcess):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def peak_rss_mb(self) -> float:
        """Peak RSS of this process plus its children's (a bound on their joint peak)."""
        total = 0.0
        for p in self.family():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += peak_rss_mb(p.pid)
        return total

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=15)


@dataclass
class Deployment:
    """`apis` API processes (each with its conductor unless `conductors` > 0)."""

    env_extra: Mapping[str, str] = field(default_factory=dict)
    conductors: int = 0  # >0: APIs with --no-conductor plus this many `shoal conductor`
    apis: int = 1  # `shoal serve` processes on one database (PostgreSQL when > 1)
    database_url: str | None = None
    host: str = "127.0.0.1"  # where the APIs listen (a local provider's bridge address)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="shoal-bench-")))
    procs: list[Process] = field(default_factory=list)
    url: str = ""
    urls: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        # The scale scenarios run clusters of 10,000 nodes: raised as an operator would.
        env.update(SHOAL_MAX_NODES_PER_CLUSTER="20000")
        env.update(SHOAL_DATA_DIR=str(self.workdir / "data"), **self.env_extra, **SERVER_ENV)
        if self.database_url:
            env["SHOAL_DATABASE_URL"] = self.database_url
        return env

    def __enter__(self) -> Deployment:
        for i in range(self.apis):
            port = free_port()
            url = f"http://{self.host}:{port}"
            argv = [SHOAL, "serve", "--host", self.host, "--port", str(port)]
            if self.conductors:
                argv.append("--no-conductor")
            log = self.workdir / ("serve.log" if i == 0 else f"serve{i}.log")
            proc = Process(argv, self.env(), log)
            proc.start()
            self.procs.append(proc)
            wait_http(url, proc)  # one at a time: the first makes the admin token and key
            self.urls.append(url)
        self.url = self.urls[0]
        for i in range(self.conductors):
            p = Process([SHOAL, "conductor"], self.env(), self.workdir / f"conductor{i}.log")
            p.start()
            self.procs.append(p)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.stop()

    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds() for p in self.procs)

    def peak_rss_mb(self) -> float:
        return max(p.peak_rss_mb() for p in self.procs)

    def client(self, api: int = 0) -> httpx.Client:
        """As the deployment's admin (the token `shoal serve` made on first start), to
        API process number `api` (modulo their count)."""
        token = (self.workdir / "data" / "admin-token").read_text().strip()
        headers = {**HEADERS, "X-Auth-Token": token}
        url = self.urls[api % len(self.urls)] if self.urls else self.url
        return httpx.Client(base_url=url + "/v1", headers=headers, timeout=120)


def wait_http(url: str, proc: Process, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.popen is not None
        if proc.popen.poll() is not None:
            raise RuntimeError(
                f"shoal exited early; see {proc.log}:\n{proc.log.read_text()[-2000:]}"
            )
        try:
            if httpx.get(url + "/", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"shoal did not answer on {url} within {timeout}s; see {proc.log}")


def check(resp: httpx.Response, *codes: int) -> Any:
    if resp.status_code not in codes:
        raise RuntimeError(
            f"{resp.request.method} {resp.request.url}: {resp.status_code} {resp.text}"
        )
    return resp.json() if resp.content else None


def cluster_body(name: str, groups: int, per_group: int, masters: int = 3) -> dict[str, Any]:
    """A cluster with `masters` masters over 3 AZs and `groups` worker groups."""
    azs = ["az-1", "az-2", "az-3"]
    node_groups: list[dict[str, Any]] = [
        {"name": "masters", "role": "master", "node_count": masters, "availability_zones": azs}
    ]
    node_groups += [
        {
            "name": f"workers-{i:02d}",
            "role": "worker",
            "node_count": per_group,
            "availability_zones": azs,
        }
        for i in range(groups)
    ]
    return {
        "name": name,
        "coe": "kubernetes",
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "master_flavor_id": "m1.small",
        "node_groups": node_groups,
        "create_timeout": 600,
    }


def wait_status(
    client: httpx.Client,
    uuids: list[str],
    want: str,
    timeout: float,
    poll: float = 0.05,
    cost_share: float | None = None,
) -> float:
    """Poll until every cluster has status `want` (or is gone, for want="GONE").

    `cost_share`: also space the polls so that answering them (timed from here)
    stays under this share of the elapsed time; for scenarios that measure CPU
    per node and list many clusters per poll (the wall time is then coarser)."""
    start = time.monotonic()
    pending = set(uuids)
    cost = 0.0
    while pending:
        if time.monotonic() - start > timeout:
            raise RuntimeError(f"{len(pending)} clusters not {want} after {timeout}s")
        t = time.monotonic()
        by_id = {c["uuid"]: c for c in list_all(client, "/clusters", "clusters")}
        cost = time.monotonic() - t
        for u in list(pending):
            c = by_id.get(u)
            if want == "GONE" and c is None or c is not None and c["status"] == want:
                pending.discard(u)
            elif c is not None and c["status"].endswith("FAILED"):
                raise RuntimeError(f"cluster {u} failed: {client.get(f'/clusters/{u}').text}")
        if pending:
            # Polling costs the server CPU that the scenario charges to shoal:
            # keep it to about 1% of the elapsed time (timing error <= 1%).
            pause = max(poll, min(0.5, 0.01 * (time.monotonic() - start)))
            if cost_share:
                pause = max(pause, min(2.0, cost / cost_share))
            time.sleep(pause)
    return time.monotonic() - start


def list_all(client: httpx.Client, path: str, key: str) -> list[dict[str, Any]]:
    """Every item of a paginated collection, following `next` links."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        page = check(client.get(path, params=params), 200)
        items += page[key]
        if not page.get("next") or not page[key]:
            return items
        params = {"limit": 1000, "marker": page[key][-1]["uuid"]}
