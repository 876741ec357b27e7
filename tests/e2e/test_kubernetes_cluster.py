"""Kubernetes through shoal, end to end: a real `shoal serve` whose `local` provider's
machines are namespace machines on this host (shoal.drivers.local), bootstrapped by
the real cloud-init from the user data shoal renders; `openstack coe` makes a cluster
of one master and one worker, `openstack coe cluster config` writes the kubeconfig,
and the harness's kubectl with only that kubeconfig sees both nodes Ready and runs a
pod on the worker. Deleting the cluster leaves nothing on the host.

Root and the harness's Kubernetes binaries are needed (skips without them; fails
under CI)."""

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

from shoal.drivers.local import hostops
from shoal.drivers.local.driver import LocalDriver
from shoal.drivers.local.testing import local_settings
from tests.harness.kubernetes.build import BUSYBOX_IMAGE, PAUSE_IMAGE, images
from tests.harness.kubernetes.node import busybox_pod
from tests.support.kubernetes import KUBERNETES_MARKS, kubernetes_unavailable
from tests.support.openstack_cli import OPENSTACK, coe_env
from tests.support.process import SHOAL, admin_token, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled

pytestmark = [*KUBERNETES_MARKS, pytest.mark.slow]
READY_TIMEOUT = 300.0
PAUSE_AS = "k8s.gcr.io/pause:3.4"  # the name the rendered containerd config starts pods with


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
    """`check()` until it gives something, within `timeout` stretched by the machine's
    load (several masters booting beside the rest of the suite on 2 cores)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f}s (last: {last!r})")


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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


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
        leftovers = Path(settings.state_dir) / "machines"
        if leftovers.is_dir():  # a failed test: remove its machines all the same
            d = LocalDriver(settings)
            for m in d.list_machines({}):
                d.delete_machine(m.machine_id)
        hostops.ip("link", "del", settings.bridge)
        lock.close()


def test_a_cluster_made_by_shoal_runs_kubernetes(
    local_cluster_env: dict[str, Any], kubernetes_bin: Path
) -> None:
    ctx = local_cluster_env
    tmp: Path = ctx["tmp"]
    shoal = Shoal(ctx["env"], ctx["gateway"], free_port(), tmp / "serve.log")
    try:
        shoal.coe("cluster", "template", "create", "k8s-local", "--coe", "kubernetes",
                  "--image", "host", "--flavor", "local", "--master-flavor", "local",
                  "--external-network", "public",
                  "--labels", "kube_tag=v1.20.2,provider=local")  # fmt: skip
        started = time.monotonic()
        shoal.coe("cluster", "create", "demo", "--cluster-template", "k8s-local",
                  "--master-count", "1", "--node-count", "1", json_out=False)  # fmt: skip

        def complete() -> dict[str, Any] | None:
            c = shoal.coe("cluster", "show", "demo")
            assert c["status"] not in ("CREATE_FAILED",), c
            return c if c["status"] == "CREATE_COMPLETE" else None

        cluster = wait_for("CREATE_COMPLETE", complete, READY_TIMEOUT, every=2)
        complete_s = time.monotonic() - started
        assert cluster["api_address"].startswith("https://" + ctx["settings"].subnet[:7])

        conf_dir = tmp / "kubeconfig"
        conf_dir.mkdir()
        shoal.coe("cluster", "config", "demo", "--dir", str(conf_dir), json_out=False)
        kubeconfig = conf_dir / "config"
        assert kubeconfig.exists()

        def kubectl(*args: str, check: bool = True) -> str:
            done = subprocess.run(
                [str(kubernetes_bin / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
                capture_output=True, text=True, timeout=60,
                env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp)},
            )  # fmt: skip
            if check:
                assert done.returncode == 0, (args, done.stderr)
            return done.stdout if done.returncode == 0 else ""

        def ready_nodes() -> dict[str, Any] | None:
            out = kubectl("get", "nodes", "-o", "json", check=False)
            if not out:
                return None
            nodes = {n["metadata"]["name"]: n for n in json.loads(out)["items"]}
            ready = {
                name: n
                for name, n in nodes.items()
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n["status"]["conditions"]
                )
            }
            return ready if len(ready) == 2 else None

        nodes = wait_for("both nodes Ready", ready_nodes, READY_TIMEOUT, every=2)
        ready_s = time.monotonic() - started
        masters = [n for n, v in nodes.items() if "node-role.kubernetes.io/master" in
                   v["metadata"]["labels"]]  # fmt: skip
        workers = [n for n in nodes if n not in masters]
        assert len(masters) == 1 and len(workers) == 1, nodes
        worker = workers[0]

        manifest = tmp / "pod.yaml"
        manifest.write_text(busybox_pod("hello", worker))
        wait_for("pod created", lambda: kubectl("apply", "-f", str(manifest), check=False), 60)

        def running() -> bool:
            return kubectl("get", "pod", "hello", "-o", "jsonpath={.status.phase}") == "Running"

        wait_for("pod Running", running, 120, every=1)
        pod = json.loads(kubectl("get", "pod", "hello", "-o", "json"))
        assert pod["spec"]["nodeName"] == worker
        print(
            f"\nthrough shoal: CREATE_COMPLETE after {complete_s:.1f}s, both nodes Ready "
            f"after {ready_s:.1f}s, pod Running after {time.monotonic() - started:.1f}s"
        )
        machines_dir = Path(ctx["settings"].state_dir) / "machines"
        assert len(list(machines_dir.iterdir())) == 2
        driver = LocalDriver(ctx["settings"])
        for m in driver.list_machines({}):
            rss = hostops.rss_kib(driver.pids(m.machine_id))
            top = ", ".join(
                f"{k} {v // 1024}" for k, v in sorted(rss.items(), key=lambda i: -i[1])[:6]
            )
            print(f"{m.name} ({m.tags['shoal-role']}): RSS {sum(rss.values()) // 1024} MiB ({top})")

        ours = {m.machine_id for m in driver.list_machines({})}  # (other runs may share the host)
        # Removing the worker by name: its machine goes, the master stays.
        (gone_worker,) = [m for m in driver.list_machines({}) if m.tags["shoal-role"] == "worker"]
        shoal.coe("cluster", "resize", "demo", "0", "--nodes-to-remove", gone_worker.machine_id,
                  json_out=False)  # fmt: skip

        def resized() -> bool:
            c = shoal.coe("cluster", "show", "demo")
            assert c["status"] != "UPDATE_FAILED", c
            return c["status"] == "UPDATE_COMPLETE" and c["node_count"] == 0

        wait_for("resized to no worker", resized, 120, every=2)
        assert [m.tags["shoal-role"] for m in driver.list_machines({})] == ["master"]
        assert not (machines_dir / gone_worker.machine_id).exists()
        assert "Ready" in kubectl("get", "node", masters[0])  # the API still answers

        shoal.coe("cluster", "delete", "demo", json_out=False)

        def gone() -> bool:
            return not [c for c in shoal.coe("cluster", "list") if c["name"] == "demo"]

        wait_for("cluster deleted", gone, 180, every=2)
        # Nothing left on the host: no machine, no lease, no veth, no cgroup, no mount.
        assert not machines_dir.exists() or list(machines_dir.iterdir()) == []
        leases = Path(ctx["settings"].state_dir) / "addresses"
        assert not leases.exists() or list(leases.iterdir()) == []
        cgroups = Path("/sys/fs/cgroup").glob("*/shoal-local-*")
        assert [c for c in cgroups if c.name.removeprefix("shoal-local-") in ours] == []
        assert ctx["settings"].state_dir not in Path("/proc/self/mountinfo").read_text()
    finally:
        shoal.stop()
