"""Kubernetes with three masters through shoal, end to end, on the harness of
tests/support/kube_cluster.py: `openstack coe cluster create --master-count 3` on the
`local` provider; the cluster's API address is the provider's balancer (no master's
address); kubectl with the kubeconfig from `openstack coe cluster config` sees every
node Ready. Then one master's machine is killed: kubectl through the same kubeconfig
still reads and writes (etcd keeps its quorum, the balancer passes the lost master
over), and shoal replaces the master: the new one joins etcd in the lost one's place
and its node goes Ready.

Root and the harness's Kubernetes binaries are needed (skips without them; fails
under CI)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from shoal.domain.bootstrap import kubernetes
from shoal.drivers.contract import Machine
from shoal.drivers.local import hostops, machines
from shoal.drivers.local.driver import LocalDriver
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

# Several waits of minutes each, stretched by load: a bound above the suite's 600 s.
pytestmark = [*KUBERNETES_MARKS, pytest.mark.slow, pytest.mark.timeout(1800)]
MASTER_LABEL = "node-role.kubernetes.io/master"


def test_three_masters_behind_the_balancer_survive_the_loss_of_one(
    local_cluster_env: dict[str, Any],
    kubernetes_bin: Path,
) -> None:
    ctx = local_cluster_env
    tmp: Path = ctx["tmp"]
    settings = ctx["settings"]
    shoal = Shoal(ctx["env"], ctx["gateway"], free_port(), tmp / "serve.log")
    try:
        shoal.coe("cluster", "template", "create", "k8s-ha", "--coe", "kubernetes",
                  "--image", "host", "--flavor", "local", "--master-flavor", "local",
                  "--external-network", "public",
                  "--labels", "kube_tag=v1.20.2,provider=local")  # fmt: skip
        started = time.monotonic()
        shoal.coe("cluster", "create", "ha", "--cluster-template", "k8s-ha",
                  "--master-count", "3", "--node-count", "1", json_out=False)  # fmt: skip

        def complete() -> dict[str, Any] | None:
            c = shoal.coe("cluster", "show", "ha")
            assert c["status"] != "CREATE_FAILED", c
            return c if c["status"] == "CREATE_COMPLETE" else None

        cluster = wait_for(
            "CREATE_COMPLETE",
            complete,
            READY_TIMEOUT,
            every=2,
            story=lambda: shoal.story(settings.state_dir),
        )
        complete_s = time.monotonic() - started
        driver = LocalDriver(settings)
        made = driver.list_machines({})
        masters = {m.name: m for m in made if m.tags["shoal-role"] == "master"}
        assert len(masters) == 3 and len(made) == 4, [m.name for m in made]
        balancer = driver.reserve_address(cluster["uuid"])
        assert cluster["api_address"] == f"https://{balancer}:6443"
        assert balancer not in {m.address for m in made}  # no machine's address

        kubectl = Kubectl(
            kubernetes_bin, shoal.kubeconfig("ha", tmp / "kubeconfig"), tmp, request_timeout="10s"
        )
        nodes = kubectl.nodes

        def story() -> str:
            return kubectl.story() + "\n" + shoal.story(settings.state_dir)

        def all_ready() -> dict[str, Any] | None:
            got = nodes()
            return got if len(ready_names(got)) == 4 else None

        seen = wait_for("all four nodes Ready", all_ready, READY_TIMEOUT, every=2, story=story)
        ready_s = time.monotonic() - started
        labelled = {n for n, v in seen.items() if MASTER_LABEL in v["metadata"]["labels"]}
        assert labelled == set(masters), (labelled, set(masters))
        print(
            f"\n3 masters + 1 worker: CREATE_COMPLETE after {complete_s:.1f}s, all nodes "
            f"Ready after {ready_s:.1f}s"
        )

        print_rss(driver)

        # The first master is lost: it started etcd and ran the cluster's one-shot steps.
        def founder(m: Machine) -> bool:
            try:
                driver.run(m.machine_id, ["test", "-e", kubernetes.CLUSTER_BOOTSTRAP])
            except hostops.MachineError:
                return False
            return True

        (lost,) = [m for m in masters.values() if founder(m)]
        etcd = driver.run(lost.machine_id, ["cat", "/etc/shoal/services.json"])
        assert '"etcd-join"' not in etcd  # it started etcd; the others joined it
        record = machines.read(Path(settings.state_dir) / "machines" / lost.machine_id)
        assert record is not None
        os.kill(record.init_pid, signal.SIGKILL)
        killed = time.monotonic()

        def answers() -> bool:
            if not kubectl("get", "nodes", check=False):
                return False  # a read
            return bool(  # a write: etcd still has a quorum
                kubectl(
                    "create", "configmap", f"after-loss-{int(time.monotonic())}", check=False
                )  # fmt: skip
            )

        wait_for("kubectl answers through the same kubeconfig", answers, 120, every=1, story=story)
        print(f"reads and writes through the balancer {time.monotonic() - killed:.1f}s after")

        # shoal replaces the lost master; the new one joins etcd and goes Ready.
        def replaced() -> str | None:
            now = {m.name for m in driver.list_machines({}) if m.tags["shoal-role"] == "master"}
            new = now - set(masters)
            if lost.name in now or not new:
                return None
            (name,) = new
            return name if name in ready_names(nodes()) else None

        new = wait_for(
            "a new master Ready in the lost one's place", replaced, READY_TIMEOUT, 2, story=story
        )
        print(f"replacement {new} Ready {time.monotonic() - killed:.1f}s after the loss")
        (machine,) = [m for m in driver.list_machines({}) if m.name == new]
        log = driver.run(machine.machine_id, ["cat", "/var/lib/shoal-agent/logs/etcd.log"])
        (tmp / "new-master-etcd.log").write_text(log)  # kept for a failure's reading
        assert f"removed member {lost.name}" in log, log[-2000:]
        assert f"added {new}" in log, log[-2000:]
        assert kubectl("get", "configmaps", "-o", "name").count("after-loss-") >= 1
        c = shoal.coe("cluster", "show", "ha")
        assert c["api_address"] == f"https://{balancer}:6443"  # unchanged

        shoal.coe("cluster", "delete", "ha", json_out=False)

        def gone() -> bool:
            return not [c for c in shoal.coe("cluster", "list") if c["name"] == "ha"]

        wait_for("cluster deleted", gone, 180, every=2)
        assert driver.list_machines({}) == []
        assert not (Path(settings.state_dir) / "balancers" / f"{cluster['uuid']}.json").exists()
        leases = Path(settings.state_dir) / "addresses"
        assert not leases.exists() or list(leases.iterdir()) == []
    finally:
        shoal.stop()
