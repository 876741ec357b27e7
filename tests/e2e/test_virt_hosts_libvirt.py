"""Reduced footprint on real parts: a `shoal serve` process whose virt host (a sim
server, role=virt) is reached at the project's own libvirtd + QEMU
(tests/harness/libvirt): the `vms` of the host group become real tiny VMs of three
sizes, one per slot, for a master group and a worker group; they answer on their
addresses with their node names; a named VM node goes, exactly that domain; deleting
the cluster leaves no domain and no disk.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness.libvirt import LibvirtHost
from tests.harness.libvirt.provider import BASE, CMDLINE, IMAGE, POOL, ensure_pool, template_text
from tests.support.libvirt_host import require_libvirt_python
from tests.support.process import admin_headers, serving, shoal_env
from tests.support.server import free_port

LATEST = {"OpenStack-API-Version": "container-infra latest"}
MIB = {"m0": 128, "w0": 160, "w1": 192}  # three sizes


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s: {what}"
        time.sleep(0.3)


def domains(host: LibvirtHost) -> list[str]:
    done = host.virsh("list", "--all", "--name")
    assert done.returncode == 0, done.stderr
    return sorted(filter(None, map(str.strip, done.stdout.splitlines())))


def config(host: LibvirtHost, tmp_path: Path) -> Path:
    ensure_pool(host)
    path = tmp_path / "shoal.yaml"
    path.write_text(
        f"""providers:
  - name: sim
    driver: sim
    settings: {{time_scale: 50}}
  - name: vms
    driver: libvirt
    concurrency_per_target: 4
    settings:
      uri_template: "{host.uri}"
      network: {host.network}
      pool: {POOL}
      domain_type: qemu
      images:
        - {{name: {IMAGE}, disk: {BASE}, kernel: {host.kernel}, initrd: {host.initrd},
            cmdline: "{CMDLINE}"}}
"""
    )
    return path


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_a_virt_hosts_vms_are_real_domains_of_their_sizes(
    libvirt_host: LibvirtHost, tmp_path: Path
) -> None:
    require_libvirt_python()
    env = shoal_env(
        tmp_path / "data",
        SHOAL_CONFIG=str(config(libvirt_host, tmp_path)),
        SHOAL_CONDUCTOR_REQUEUE_SECONDS="0.5",
    )
    vms = [
        {"id": "m0", "cpu": 1, "ram": MIB["m0"] / 1024, "nodegroup": "m"},
        {"id": "w0", "cpu": 1, "ram": MIB["w0"] / 1024, "nodegroup": "w"},
        {"id": "w1", "cpu": 2, "ram": MIB["w1"] / 1024, "nodegroup": "w"},
    ]
    body = {
        "name": "edge",
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "node_groups": [
            {"name": "m", "role": "master", "provider": "vms", "image_id": IMAGE,
             "node_count": 1},
            {"name": "w", "provider": "vms", "image_id": IMAGE, "node_count": 2},
            {"name": "hosts", "role": "virt", "flavor_id": "bm.large", "node_count": 1,
             "vms": vms, "vm_template": template_text()},
        ],
    }  # fmt: skip
    port = free_port()
    with serving(env, port, tmp_path / "serve.log"):
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(env), timeout=30
        )
        r = c.post("/clusters", json=body)
        assert r.status_code == 202, r.text
        wait(
            lambda: c.get("/clusters/edge").json()["status"] == "CREATE_COMPLETE",
            240,
            f"create: {c.get('/clusters/edge').json().get('status_reason')}",
        )
        listed = c.get("/clusters/edge/nodes").json()["nodes"]
        (host,) = [n for n in listed if n["nodegroup_name"] == "hosts"]
        vm_nodes = [n for n in listed if n["nodegroup_name"] != "hosts"]
        assert sorted(n["name"] for n in vm_nodes) == domains(libvirt_host)
        for n in vm_nodes:
            assert n["availability_zone"] == host["name"]
            xml = libvirt_host.virsh("dumpxml", n["name"]).stdout
            assert f"<memory unit='KiB'>{MIB[n['vm']] * 1024}</memory>" in xml, xml[:400]
            assert libvirt_host.wait_http(n["address"], timeout=60).strip() == n["name"]
        victim = next(n for n in vm_nodes if n["vm"] == "w0")
        resize = {"node_count": 1, "nodegroup": "w", "nodes_to_remove": [victim["name"]]}
        assert c.post("/clusters/edge/actions/resize", json=resize).status_code == 202
        wait(lambda: victim["name"] not in domains(libvirt_host), 120, "the named VM to go")
        wait(lambda: c.get("/clusters/edge").json()["status"] == "UPDATE_COMPLETE", 120, "resize")
        left = sorted(n["name"] for n in vm_nodes if n is not victim)
        assert domains(libvirt_host) == left  # exactly that one went
        refused = c.delete("/clusters/edge/nodegroups/hosts")
        assert refused.status_code == 409 and left[0] in refused.text  # it carries VMs
        assert c.delete("/clusters/edge").status_code == 204
        wait(lambda: c.get("/clusters/edge").status_code == 404, 120, "cluster delete")
        assert domains(libvirt_host) == []
        pool = libvirt_host.workdir / "pool"
        assert sorted(p.name for p in pool.iterdir() if p.name != BASE) == []
