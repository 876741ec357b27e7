"""A libvirt provider of two hosts through a real `shoal serve`, on libvirt's test driver (no
daemon, no root): a full host is refused there and the conductor places the node on the
group's next zone, the next host; a group naming no zone is placed by the driver."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal.drivers.libvirt.template import DEFAULT
from tests.support.libvirt_host import require_libvirt_python
from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port

LATEST = {"OpenStack-API-Version": "container-infra latest"}
NODE_XML = """<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads>
    <active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>
  <memory>16777216</memory>
  <network><name>default</name><bridge name='virbr0'/>
    <ip address='192.168.122.1' netmask='255.255.255.0'/></network>
</node>
"""


def config(tmp_path: Path) -> Path:
    node = tmp_path / "node.xml"
    node.write_text(NODE_XML)
    path = tmp_path / "shoal.yaml"
    path.write_text(
        f"""providers:
  - name: rack
    driver: libvirt
    concurrency_per_target: 2
    settings:
      hosts:
        - {{name: h1, uri: "test://{node}", cores: 1, ram_mb: 1024}}
        - {{name: h2, uri: "test://{node}", cores: 8, ram_mb: 8192}}
      domain_type: qemu
      flavors: [{{name: one, vcpus: 1, ram_mb: 1024}}]
      images: [{{name: tiny, kernel: /boot/vmlinuz, cmdline: "console=ttyS0"}}]
"""
    )
    return path


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s: {what}"
        time.sleep(0.2)


@pytest.mark.libvirt
def test_a_full_host_sends_nodes_to_the_next_host(tmp_path: Path) -> None:
    require_libvirt_python()
    env = shoal_env(tmp_path / "data", SHOAL_CONFIG=str(config(tmp_path)))
    port = free_port()
    with serving(env, port, tmp_path / "serve.log"):
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(env), timeout=30
        )
        wait(lambda: c.get("/providers/rack").json()["reachable"], 30, "the provider's check")
        seen = c.get("/providers/rack").json()
        assert (seen["driver"], seen["availability_zones"]) == ("libvirt", ["h1", "h2"])
        assert (seen["flavors"], seen["images"]) == (["one"], ["tiny"])
        assert sorted(seen["features"]) == ["reboot", "rebuild"]
        body = {
            "name": "spread",
            "image_id": "tiny",
            "flavor_id": "one",
            "node_groups": [
                {"name": "m", "role": "master", "node_count": 1},  # no zone: the driver places
                {"name": "w", "node_count": 4, "availability_zones": ["h1", "h2"]},
            ],
        }
        assert c.post("/clusters", json=body).status_code == 202
        wait(
            lambda: c.get("/clusters/spread").json()["status"] == "CREATE_COMPLETE",
            60,
            str(c.get("/clusters/spread").json().get("status_reason")),
        )
        nodes = c.get("/clusters/spread/nodes").json()["nodes"]
        zones = {n["name"]: n["availability_zone"] for n in nodes}
        masters = [zones[n["name"]] for n in nodes if n["nodegroup_name"] == "m"]
        workers = [zones[n["name"]] for n in nodes if n["nodegroup_name"] == "w"]
        assert len(nodes) == 5 and all(n["address"] for n in nodes)
        assert masters == ["h2"]  # the emptiest host once the master is on it (1/8 < 1/1)
        # the even spread asked h1 for two workers: it has room for one, the other moved on
        assert sorted(workers) == ["h1", "h2", "h2", "h2"]
        events = c.get("/clusters/spread/events").json()["events"]
        said = " ".join(str(e.get("message", "")) for e in events)
        assert "no valid host in h1 for node" in said, said
        assert "No valid host was found: host h1 is full for one (1 cores, 1024 MiB)" in said
        assert c.delete("/clusters/spread").status_code == 204
        wait(lambda: c.get("/clusters/spread").status_code == 404, 60, "delete")


def test_a_template_that_is_not_domain_xml_stops_serve_in_one_line(tmp_path: Path) -> None:
    """Checked when the provider opens, before any host is reached (no libvirt needed)."""
    template = tmp_path / "domain.xml"
    template.write_text(DEFAULT.replace("<vcpu>{vcpus}</vcpu>", "<vcpu>{cpus}</vcpu>"))
    path = config(tmp_path)
    path.write_text(path.read_text() + f"      domain_template: {template}\n")
    for command in (["serve", "--port", str(free_port())], ["conductor"]):
        done = subprocess.run(
            [SHOAL, *command],
            env=shoal_env(tmp_path / "data", SHOAL_CONFIG=str(path)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        assert errors == [
            f"error: provider 'rack': domain_template {template}: line 6: <vcpu> must be a "
            "positive whole number, not '': <vcpu></vcpu>"
        ], done.stderr
        assert "Traceback" not in done.stderr
