"""A real Kubernetes v1.20.2 cluster in two namespace machines (tests/harness/kubernetes):
a tainted master and a worker that joins by TLS bootstrap; both go Ready and a busybox
pod runs on the worker, reached through the master's API address from the host."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.kubernetes.build import images
from tests.harness.kubernetes.node import TestCluster, busybox_pod
from tests.support.kubernetes import KUBERNETES_MARKS, require_namespace_machines

pytestmark = [*KUBERNETES_MARKS, pytest.mark.slow]


def _wait_for(check: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return False


# A cold build of the binaries in the fixture takes up to 30 min on a loaded 2-core machine
# (./run test is meant to build them first: `python -m tests.harness.kubernetes build`).
@pytest.mark.timeout(2400)
def test_master_and_worker_go_ready_and_run_a_pod_on_the_worker(kubernetes_bin: Path) -> None:
    require_namespace_machines()
    cluster = TestCluster(
        kubernetes_bin, images(), keep=os.environ.get("SHOAL_TEST_K8S_KEEP") == "1"
    )
    try:
        cluster.start_master("master")
        cluster.join_worker("worker")
        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
        by_name = {n["metadata"]["name"]: n for n in nodes}
        assert sorted(by_name) == ["master", "worker"]
        for node in by_name.values():
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready[0]["status"] == "True"
        assert by_name["master"]["spec"]["taints"][0]["key"] == "node-role.kubernetes.io/master"
        assert "node-role.kubernetes.io/master" in by_name["master"]["metadata"]["labels"]
        assert not by_name["worker"]["spec"].get("taints")
        addresses = {
            name: [a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"]
            for name, n in by_name.items()
        }
        assert addresses == {
            "master": [cluster.machines["master"].ip],
            "worker": [cluster.machines["worker"].ip],
        }
        # The worker's client cert was issued through the bootstrap CSR, not by kubeadm.
        csrs = json.loads(cluster.kubectl("get", "csr", "-o", "json"))["items"]
        assert any(c["spec"]["username"].startswith("system:bootstrap:") for c in csrs)

        manifest = cluster.work_dir / "pod.yaml"
        manifest.write_text(busybox_pod("hello", "worker"))
        assert _wait_for(lambda: cluster.kubectl("apply", "-f", str(manifest), check=False), 30)

        def phase() -> str:
            return cluster.kubectl("get", "pod", "hello", "-o", "jsonpath={.status.phase}")

        assert _wait_for(lambda: phase() == "Running", 60), cluster.kubectl(
            "describe", "pod", "hello"
        )
        pod = json.loads(cluster.kubectl("get", "pod", "hello", "-o", "json"))
        assert pod["spec"]["nodeName"] == "worker"
        assert pod["status"]["podIP"].startswith("10.244.2.")  # the worker's own pod subnet
        # logs and exec go from the apiserver to the worker's kubelet over the bridge
        assert _wait_for(
            lambda: "hello-from-hello" in cluster.kubectl("logs", "hello", check=False), 20
        )
        assert cluster.kubectl("exec", "hello", "--", "hostname").strip() == "hello"
        # the pod is reachable from the worker machine, not from the master's pod network
        worker = cluster.machines["worker"]
        got = worker.run(
            ["busybox", "wget", "-q", "-O", "-", f"http://{pod['status']['podIP']}:8080/hostname"]
        )
        assert got.stdout.strip() == "hello"
        # Each kubelet's pods live in its own cgroup root.
        memory = Path("/sys/fs/cgroup/memory")
        assert (memory / worker.cgroup_root.lstrip("/") / "kubepods").is_dir()
    finally:
        roots = [m.cgroup_root.lstrip("/") for m in cluster.machines.values()]
        bridge = cluster.bridge.name if cluster.bridge else ""
        cluster.stop()
    # Nothing is left: no mount, no cgroup (v1 or the hybrid cgroup2), no bridge, no work dir.
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(cluster.work_dir) not in mounts
    assert [p for r in roots for p in Path("/sys/fs/cgroup").glob(f"*/{r}")] == []
    assert bridge and not Path(f"/sys/class/net/{bridge}").exists()
    assert not cluster.work_dir.exists()
