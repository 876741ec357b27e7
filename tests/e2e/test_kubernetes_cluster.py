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
import time
from pathlib import Path
from typing import Any

import pytest

from shoal.drivers.local.driver import LocalDriver
from tests.harness.kubernetes.node import busybox_pod
from tests.support.kube_cluster import (
    READY_TIMEOUT,
    Kubectl,
    Shoal,
    print_rss,
    ready_names,
    wait_for,
)
from tests.support.kubernetes import KUBERNETES_MARKS
from tests.support.server import free_port

pytestmark = [*KUBERNETES_MARKS, pytest.mark.slow]


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

        cluster = wait_for(
            "CREATE_COMPLETE",
            complete,
            READY_TIMEOUT,
            every=2,
            story=lambda: shoal.story(ctx["settings"].state_dir),
        )
        complete_s = time.monotonic() - started
        assert cluster["api_address"].startswith("https://" + ctx["settings"].subnet[:7])

        kubectl = Kubectl(kubernetes_bin, shoal.kubeconfig("demo", tmp / "kubeconfig"), tmp)
        state_dir = ctx["settings"].state_dir

        def ready_nodes() -> dict[str, Any] | None:
            nodes = kubectl.nodes()
            return nodes if len(ready_names(nodes)) == 2 else None

        nodes = wait_for(
            "both nodes Ready",
            ready_nodes,
            READY_TIMEOUT,
            every=2,
            story=lambda: kubectl.story() + "\n" + shoal.story(state_dir),
        )
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
        print_rss(driver)

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
