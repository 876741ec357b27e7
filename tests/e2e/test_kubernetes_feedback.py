"""Kubernetes feeds shoal back, end to end, through the real parts: a real `shoal serve`
whose `local` provider runs a cluster of one master and one worker (real cloud-init,
the real v1.20.2 binaries), driven by `openstack coe` and shoal's own API:

- the worker group's `node_labels` and `node_taints` appear on its Node object (the
  conductor patches it with a client certificate it issues from the cluster's CA);
- a worker whose kubelet hangs (SIGSTOP: a killed kubelet is restarted by the node
  agent within seconds) goes NotReady, the cluster turns UNHEALTHY with the reason
  in `health_status_reason`, and the repair ladder replaces it (the local driver
  cannot reboot or rebuild): the new worker joins and the cluster is HEALTHY again;
- `resize --nodes-to-remove <worker>` drains it (its pod evicted) and its Node object
  is deleted once its machine is gone.

Root and the harness's Kubernetes binaries are needed (skips without them; fails
under CI). One cluster for all three: each costs about a minute to make."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.domain import kubenodes
from shoal.drivers.local.driver import LocalDriver
from tests.harness.kubernetes.build import BUSYBOX_IMAGE
from tests.support.kube_cluster import READY_TIMEOUT, Kubectl, Shoal, is_ready, wait_for
from tests.support.kubernetes import KUBERNETES_MARKS
from tests.support.server import free_port

pytestmark = [*KUBERNETES_MARKS, pytest.mark.slow]
LATEST = {"OpenStack-API-Version": "container-infra latest"}
UNHEALTHY_TIMEOUT_S = 15


def _kubelet_pids(driver: LocalDriver, machine_id: str) -> list[int]:
    out = []
    for pid in driver.pids(machine_id):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "kubelet":
                out.append(pid)
        except OSError:
            continue
    return out


def test_kubernetes_feeds_health_labels_and_drains(
    local_cluster_env: dict[str, Any],
    kubernetes_bin: Path,
) -> None:
    ctx = local_cluster_env
    tmp: Path = ctx["tmp"]
    env = {
        **ctx["env"],
        "SHOAL_CONDUCTOR_KUBE_CHECK_SECONDS": "2",
        "SHOAL_CONDUCTOR_DRAIN_TIMEOUT_SECONDS": "60",
    }
    shoal = Shoal(env, ctx["gateway"], free_port(), tmp / "serve.log")
    api = httpx.Client(
        base_url=shoal.url + "/v1",
        headers={**LATEST, "X-Auth-Token": shoal.token},
        timeout=30,
    )
    started = time.monotonic()
    marks: dict[str, float] = {}
    try:
        shoal.coe("cluster", "template", "create", "k8s-local", "--coe", "kubernetes",
                  "--image", "host", "--flavor", "local", "--master-flavor", "local",
                  "--external-network", "public",
                  "--labels", "kube_tag=v1.20.2,provider=local")  # fmt: skip
        shoal.coe("cluster", "create", "demo", "--cluster-template", "k8s-local",
                  "--master-count", "1", "--node-count", "1", json_out=False)  # fmt: skip
        groups = api.get("/clusters/demo/nodegroups").json()["nodegroups"]
        (workers,) = [g for g in groups if g["role"] == "worker"]
        # Labels, a taint and a short unhealthy timeout on the worker group, before it is
        # ready: they reach its Node once it registers.
        r = api.patch(
            f"/clusters/demo/nodegroups/{workers['uuid']}",
            json=[
                {"op": "replace", "path": "/node_labels", "value": {"disk": "ssd"}},
                {
                    "op": "replace",
                    "path": "/node_taints",
                    "value": [{"key": "dedicated", "value": "e2e", "effect": "NoSchedule"}],
                },
                {
                    "op": "replace",
                    "path": "/health_policy",
                    "value": {"unhealthy_timeout_s": UNHEALTHY_TIMEOUT_S},
                },
            ],  # fmt: skip
        )
        assert r.status_code == 202, r.text

        def complete() -> dict[str, Any] | None:
            c = shoal.coe("cluster", "show", "demo")
            assert c["status"] not in ("CREATE_FAILED", "UPDATE_FAILED"), c
            return c if c["status"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE") else None

        def story() -> str:
            return shoal.story(ctx["settings"].state_dir)

        wait_for("cluster complete", complete, READY_TIMEOUT, every=2, story=story)
        kubectl = Kubectl(kubernetes_bin, shoal.kubeconfig("demo", tmp / "kubeconfig"), tmp)
        nodes = kubectl.nodes

        def worker_node() -> tuple[str, dict[str, Any]] | None:
            for name, n in nodes().items():
                labels = n["metadata"].get("labels", {})
                if labels.get(kubenodes.GROUP_LABEL) == workers["uuid"] and is_ready(n):
                    return name, n
            return None

        # 1. The group's label and taint on the worker's Node (the master's Node carries
        # its own group's label, and not the worker's taint).
        def labelled() -> tuple[str, dict[str, Any]] | None:
            found = worker_node()
            if found is None:
                return None
            n = found[1]
            taints = {(t["key"], t.get("value", ""), t["effect"]) for t in
                      n["spec"].get("taints", [])}  # fmt: skip
            ok = n["metadata"]["labels"].get("disk") == "ssd" and (
                ("dedicated", "e2e", "NoSchedule") in taints
            )
            return found if ok else None

        worker, _ = wait_for(
            "the worker's Node labelled and tainted", labelled, READY_TIMEOUT, story=story
        )
        marks["labelled"] = time.monotonic() - started
        all_nodes = nodes()
        (master,) = [n for n in all_nodes if n != worker]
        assert "disk" not in all_nodes[master]["metadata"]["labels"]
        assert kubenodes.GROUP_LABEL in all_nodes[master]["metadata"]["labels"]

        # 2. A hung kubelet: NotReady in Kubernetes, UNHEALTHY in shoal, then repaired.
        driver = LocalDriver(ctx["settings"])
        (machine,) = [m for m in driver.list_machines({}) if m.name == worker]
        pids = _kubelet_pids(driver, machine.machine_id)
        assert pids, "no kubelet on the worker"
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        frozen_at = time.monotonic()

        def unhealthy() -> dict[str, Any] | None:
            c = shoal.coe("cluster", "show", "demo")
            why = json.dumps(c.get("health_status_reason") or {})
            return c if c["health_status"] == "UNHEALTHY" and worker in why else None

        sick = wait_for("the cluster UNHEALTHY because of the worker", unhealthy, 300, every=2)
        marks["unhealthy after freeze"] = time.monotonic() - frozen_at
        reason = json.dumps(sick["health_status_reason"])
        assert "Kubernetes reports it" in reason, reason

        def repaired() -> str | None:
            c = shoal.coe("cluster", "show", "demo")
            if c["health_status"] != "HEALTHY":
                return None
            found = worker_node()
            return found[0] if found is not None and found[0] != worker else None

        new_worker = wait_for("a new worker Ready and the cluster HEALTHY", repaired, 400)
        marks["repaired after freeze"] = time.monotonic() - frozen_at
        assert worker not in wait_for(
            "the old worker's Node deleted", lambda: (n := nodes()) and worker not in n and n, 120
        )
        events = api.get("/clusters/demo/events").json()
        said = " | ".join(e.get("message", "") for e in events.get("events", events))
        assert f"node {worker} was ready, but Kubernetes reports it" in said, said

        # 3. Removing the new worker by name drains it, then its Node object goes.
        manifest = tmp / "pod.yaml"
        manifest.write_text(json.dumps(_pod("hello", new_worker)))
        wait_for("pod created", lambda: kubectl("apply", "-f", str(manifest), check=False), 60)
        wait_for("pod Running", lambda: kubectl("get", "pod", "hello", "-o",
                 "jsonpath={.status.phase}") == "Running", 120)  # fmt: skip
        (gone,) = [m for m in driver.list_machines({}) if m.name == new_worker]
        removing = time.monotonic()
        shoal.coe("cluster", "resize", "demo", "0", "--nodes-to-remove", gone.machine_id,
                  json_out=False)  # fmt: skip

        def resized() -> bool:
            c = shoal.coe("cluster", "show", "demo")
            assert c["status"] != "UPDATE_FAILED", c
            return c["status"] == "UPDATE_COMPLETE" and c["node_count"] == 0

        wait_for("resized to no worker", resized, 180, every=2)
        marks["removed with drain"] = time.monotonic() - removing
        assert new_worker not in nodes()
        assert kubectl("get", "pod", "hello", "--ignore-not-found", "-o", "name") == ""
        events = api.get("/clusters/demo/events").json()
        said = " | ".join(e.get("message", "") for e in events.get("events", events))
        assert f"draining node {new_worker}" in said and f"node {new_worker} drained" in said
        assert f"Node {new_worker} deleted from Kubernetes" in said
        print("\n" + ", ".join(f"{k}: {v:.1f} s" for k, v in marks.items()))
    finally:
        api.close()
        shoal.stop()


def _pod(name: str, node: str) -> dict[str, Any]:
    """A busybox pod (the harness's image) on `node`, tolerating the group's taint."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "e2e", "effect": "NoSchedule"}
            ],
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", "exec httpd -f -p 8080 -h /etc"],
                }
            ],
        },
    }
