"""The end-to-end Kubernetes tests' shared harness: a real `shoal serve` on the local
provider's bridge (`Shoal`), the `local_cluster_env` fixture that lays out that provider
and its bridge, kubectl through the kubeconfig `openstack coe cluster config` writes
(`Kubectl`), and `wait_for`, which on a timeout says what the machines were doing (their
logs' tails, the server's log), so that a slow or stuck run can be read from its failure.

The fixture is registered in tests/e2e/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.drivers.local import balancer, hostops
from shoal.drivers.local.driver import LocalDriver
from shoal.drivers.local.testing import local_settings
from tests.harness.kubernetes.build import BUSYBOX_IMAGE, PAUSE_IMAGE, images
from tests.support.kubernetes import kubernetes_unavailable
from tests.support.openstack_cli import OPENSTACK, coe_env
from tests.support.process import SHOAL, admin_token, shoal_env
from tests.support.waiting import scaled

READY_TIMEOUT = 300.0
PAUSE_AS = "k8s.gcr.io/pause:3.4"  # the name the rendered containerd config starts pods with
STORY_FILES = 12  # log files shown per machine on a timeout
STORY_LINES = 15  # lines of each
# Where a local machine's logs are, under its dir: the init's and cloud-init's, the node
# agent's per service (kubelet, etcd, ...; /var/lib is an overlay), /var/log's.
LOG_DIRS = ("log", "ov/_var_lib/upper/shoal-agent/logs", "ov/_var_log/upper")


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    every: float = 1.0,
    story: Callable[[], str] | None = None,
) -> Any:
    """`check()` until it gives something, within `timeout` stretched by the machine's
    load (several masters booting beside the rest of the suite on 2 cores). On a timeout
    the message carries `story()`: what the machines and the server were doing."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    told = f"\n{story()}" if story else ""
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r}){told}")


def tail(path: Path, lines: int = STORY_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def machines_story(state_dir: str | Path) -> str:
    """Each local machine's log files, their tails (newest first), for a failure message."""
    parts: list[str] = []
    for machine in sorted((Path(state_dir) / "machines").glob("*")):
        found = [p for d in LOG_DIRS for p in (machine / d).rglob("*") if p.is_file()]
        logs = sorted(
            (p for p in found if p.suffix in (".log", ".out")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )[:STORY_FILES]
        parts.append(f"== machine {machine.name}")
        parts += [f"-- {p.relative_to(machine)}\n{tail(p)}" for p in logs]
    return "\n".join(parts) or "(no machines)"


class Shoal:
    """`shoal serve` on the local provider's bridge address (where its machines' agents
    reach it), and the `openstack coe` CLI against it."""

    def __init__(self, env: dict[str, str], host: str, port: int, log: Path) -> None:
        self.env, self.host, self.port, self.log = env, host, port, log
        self.url = f"http://{host}:{port}"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [SHOAL, "serve", "--host", host, "--port", str(port)],
                env=env,
                stdout=out,
                stderr=out,
            )

        def up() -> bool:
            assert self.proc.poll() is None, log.read_text()[-3000:]
            try:
                return httpx.get(self.url + "/", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_for("shoal serve answers", up, 60, every=0.1)
        self.token = admin_token(env)

    def coe(self, *args: str, json_out: bool = True) -> Any:
        cmd = [OPENSTACK, "--os-auth-type", "admin_token", "--os-endpoint", self.url + "/v1",
               "--os-token", self.token, "coe", *args]  # fmt: skip
        cmd += ["-f", "json"] if json_out else []
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=coe_env())
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        if not json_out:
            return done.stdout
        starts = [i for i in (done.stdout.find("{"), done.stdout.find("[")) if i >= 0]
        return json.loads(done.stdout[min(starts) :])

    def kubeconfig(self, cluster: str, directory: Path) -> Path:
        """`openstack coe cluster config` into `directory`; the kubeconfig's path."""
        directory.mkdir()
        self.coe("cluster", "config", cluster, "--dir", str(directory), json_out=False)
        path = directory / "config"
        assert path.exists(), list(directory.iterdir())
        return path

    def story(self, state_dir: str | Path) -> str:
        return f"{machines_story(state_dir)}\n== shoal serve\n{tail(self.log, 40)}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Kubectl:
    """The harness's kubectl with only the kubeconfig shoal handed out."""

    def __init__(
        self, bin_dir: Path, kubeconfig: Path, home: Path, request_timeout: str = ""
    ) -> None:
        self.argv = [str(bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig)]
        self.argv += [f"--request-timeout={request_timeout}"] if request_timeout else []
        self.env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home)}

    def __call__(self, *args: str, check: bool = True) -> str:
        """kubectl's output; with `check`, a failure fails the test, else it reads as ""."""
        done = subprocess.run(
            [*self.argv, *args], capture_output=True, text=True, timeout=60, env=self.env
        )
        if check:
            assert done.returncode == 0, (args, done.stderr)
        return done.stdout if done.returncode == 0 else ""

    def nodes(self) -> dict[str, Any]:
        """The cluster's Nodes by name ({} while the API does not answer)."""
        out = self("get", "nodes", "-o", "json", check=False)
        return {n["metadata"]["name"]: n for n in json.loads(out)["items"]} if out else {}

    def story(self) -> str:
        return "== kubectl get nodes -o wide\n" + (
            self("get", "nodes", "-o", "wide", check=False) or "(the API does not answer)"
        )


def print_rss(driver: LocalDriver) -> None:
    """Each machine's resident memory, its six largest processes named (a figure the
    end-to-end tests print)."""
    for m in driver.list_machines({}):
        rss = hostops.rss_kib(driver.pids(m.machine_id))
        top = ", ".join(f"{k} {v // 1024}" for k, v in sorted(rss.items(), key=lambda i: -i[1])[:6])
        print(f"{m.name} ({m.tags['shoal-role']}): RSS {sum(rss.values()) // 1024} MiB ({top})")


def is_ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def ready_names(nodes: dict[str, Any]) -> set[str]:
    return {name for name, n in nodes.items() if is_ready(n)}


@pytest.fixture
def local_cluster_env(tmp_path: Path, kubernetes_bin: Path) -> Iterator[dict[str, Any]]:
    why = hostops.missing_prerequisites() or (
        "" if Path("/usr/bin/cloud-init").exists() else "cloud-init is not installed"
    )
    if why:
        kubernetes_unavailable(why)
    settings, lock = local_settings(tmp_path)
    archives = images()
    config = {
        "default_provider": "sim",
        "providers": [
            {"name": "sim", "driver": "sim"},
            {
                "name": "local",
                "driver": "local",
                "settings": {
                    "state_dir": settings.state_dir,
                    "bridge": settings.bridge,
                    "subnet": settings.subnet,
                    "kubernetes_bin": str(kubernetes_bin),
                    "preload": [
                        {"archive": str(archives[PAUSE_IMAGE]), "names": [PAUSE_AS]},
                        {"archive": str(archives[BUSYBOX_IMAGE])},
                    ],
                },
            },
        ],
    }
    (tmp_path / "shoal.yaml").write_text(json.dumps(config))
    # The bridge exists before shoal listens on its address (docs/drivers.md).
    gateway = settings.subnet.rsplit(".", 1)[0] + ".1"
    if hostops.link_exists(settings.bridge):  # a leftover of a killed run in this slot
        hostops.ip("link", "del", settings.bridge)
    hostops.ip("link", "add", settings.bridge, "type", "bridge")
    try:
        hostops.ip("addr", "add", f"{gateway}/24", "dev", settings.bridge)
        hostops.ip("link", "set", settings.bridge, "up")
        env = shoal_env(tmp_path / "data", SHOAL_CONFIG=str(tmp_path / "shoal.yaml"))
        yield {"env": env, "gateway": gateway, "settings": settings, "tmp": tmp_path}
    finally:
        state_dir = Path(settings.state_dir)
        if (state_dir / "machines").is_dir():  # a failed test: remove its machines all the same
            d = LocalDriver(settings)
            for m in d.list_machines({}):
                d.delete_machine(m.machine_id)
        # A cluster the test did not delete keeps its balancer, listening on the slot's
        # first address: the next test in this slot could not bind it (EADDRINUSE) and its
        # kubectl would reach the old cluster's balancer.
        for r in balancer.every(state_dir):
            balancer.stop(state_dir, r.cluster_id, settings.bridge)
        hostops.ip("link", "del", settings.bridge)
        lock.close()
