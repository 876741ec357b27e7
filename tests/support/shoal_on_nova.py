"""A real `shoal serve` whose one provider is the OpenStack test cloud: a config file
naming the provider (a project of its own, a clouds.yaml entry), a data directory,
a free port; the API client; what Nova holds for the deployment.

    with shoal_on_nova(cloud, tmp_path) as s:
        s.api.post("/clusters", json=...)
        s.wait_status("c1", "CREATE_COMPLETE")
        s.project.servers()                       # Nova's view, as admin
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import yaml

from tests.support.openstack_project import ShoalProject, shoal_project
from tests.support.process import SHOAL, admin_headers, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled, until

if TYPE_CHECKING:
    from tests.harness.openstack.cloud import OpenStackCloud

LATEST = {"OpenStack-API-Version": "container-infra latest"}
# Fast enough for tests: the provider is looked at (and its empty server groups
# tidied) every second.
ENV = {"SHOAL_CONDUCTOR_PROVIDER_CHECK_SECONDS": "1", "SHOAL_CONDUCTOR_SWEEP_SECONDS": "2"}


@dataclass
class ShoalOnNova:
    """One shoal deployment on the test cloud; `start`/`kill`/`stop` its process."""

    cloud: OpenStackCloud
    project: ShoalProject
    work: Path
    deployment: str
    settings: dict[str, Any] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    driver: str = "openstack"  # or "heat": each node group one Heat stack

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url + "/v1", headers=admin_headers(self.env()), timeout=30
        )

    def config(self) -> Path:
        clouds = self.project.clouds_yaml(self.work / "clouds.yaml")
        own = {"server_group_grace_seconds": 1} if self.driver == "openstack" else {}
        settings = {
            "cloud": self.project.entry,
            "clouds_yaml": str(clouds),
            "deployment": self.deployment,
            **own,
            **self.settings,
        }
        path = self.work / "shoal.yaml"
        provider = {"name": "nova", "driver": self.driver, "settings": settings}
        path.write_text(yaml.safe_dump({"providers": [provider]}))
        return path

    def env(self) -> dict[str, str]:
        return shoal_env(self.work / "data", SHOAL_CONFIG=str(self.config()), **ENV)

    def start(self) -> None:
        """`shoal serve` until its API answers."""
        self.starts += 1
        log = self.work / f"serve-{self.starts}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [SHOAL, "serve", "--port", str(self.port)], env=self.env(), stdout=out, stderr=out
            )
        deadline = time.monotonic() + scaled(60)
        while True:
            assert self.proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "shoal serve did not start"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def wait(self, check: Any, what: str, timeout: float = 120.0) -> Any:
        """`check()` until it is true (its value), at most `timeout` seconds."""
        deadline = time.monotonic() + scaled(timeout)  # stretched on a loaded machine
        while not (got := check()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}{self.tail()}"
            time.sleep(0.5)
        return got

    def status(self, cluster: str) -> str:
        with self.api as c:
            got = c.get(f"/clusters/{cluster}")
        return "GONE" if got.status_code == 404 else str(got.json()["status"])

    def wait_status(self, cluster: str, want: str, timeout: float = 120.0) -> None:
        """Until the cluster's status is `want`; fails on a FAILED status, or when its
        groups' and nodes' states stay the same `timeout` seconds (stretched by the load),
        saying where each group stands and what shoal logged last."""

        def reached() -> bool:
            s = self.status(cluster)
            assert not s.endswith("FAILED"), self.explain(cluster) + self.tail()
            return s == want

        try:
            until(reached, progress=lambda: self.states(cluster), what=f"{cluster} {want}",
                  idle=timeout, cap=max(900.0, 4 * timeout), interval=0.5)  # fmt: skip
        except AssertionError as exc:
            raise AssertionError(f"{exc}; now {self.explain(cluster)}{self.tail()}") from None

    def states(self, cluster: str) -> tuple[str, list[str], list[str]]:
        """What changes while a cluster converges: its status, its groups' and its nodes'."""
        with self.api as c:
            got = c.get(f"/clusters/{cluster}")
            if got.status_code == 404:
                return ("GONE", [], [])
            groups = c.get(f"/clusters/{cluster}/nodegroups").json().get("nodegroups", [])
            nodes = c.get(f"/clusters/{cluster}/nodes").json().get("nodes", [])
        return (
            str(got.json()["status"]),
            sorted(f"{g['name']}={g['status']}" for g in groups),
            sorted(f"{n.get('status')}" for n in nodes),
        )

    def explain(self, cluster: str) -> str:
        with self.api as c:
            groups = c.get(f"/clusters/{cluster}/nodegroups").json().get("nodegroups", [])
        return "; ".join(f"{g['name']}: {g['status']} {g.get('status_reason')}" for g in groups)

    def tail(self, lines: int = 30) -> str:
        """The last lines shoal serve logged (the current start's log)."""
        log = self.work / f"serve-{self.starts}.log"
        if not log.exists():
            return ""
        last = log.read_text(errors="replace").splitlines()[-lines:]
        return f"\n--- last {len(last)} lines of {log.name} ---\n" + "\n".join(last)

    def nodes(self, cluster: str, group: str | None = None) -> list[dict[str, Any]]:
        params = {"nodegroup": group} if group else {}
        with self.api as c:
            return list(c.get(f"/clusters/{cluster}/nodes", params=params).json()["nodes"])

    def servers(self) -> list[Any]:
        """This deployment's servers in Nova (admin's view), deleted ones excluded."""
        return [
            s
            for s in self.project.servers()
            if (s.metadata or {}).get("shoal-deployment") == self.deployment
        ]


@contextlib.contextmanager
def shoal_on_nova(
    cloud: OpenStackCloud, work: Path, driver: str = "openstack", **settings: Any
) -> Iterator[ShoalOnNova]:
    """A started shoal serve on a new project of `cloud` (its provider of kind `driver`:
    openstack, or heat on a cloud whose Heat runs); stopped at the end."""
    work.mkdir(parents=True, exist_ok=True)
    project = shoal_project(cloud, "e2e")
    s = ShoalOnNova(cloud, project, work, f"e2e-{uuid.uuid4().hex[:8]}", settings, driver=driver)
    s.start()
    try:
        yield s
    finally:
        s.stop()
