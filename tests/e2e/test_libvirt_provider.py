"""Real tiny VMs through shoal: a `shoal serve` process whose config file names a libvirt
provider on the project's own libvirtd + QEMU (tests/harness/libvirt), driven over HTTP.

The cluster's nodes boot as real domains, answer HTTP on the addresses shoal reports
with their own node names, and hold the user data shoal rendered for them; a node named
in a resize goes, exactly that one; deleting the cluster leaves no domain and no disk.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness.libvirt import LibvirtHost
from tests.harness.libvirt.provider import FLAVOR, IMAGE, prepare
from tests.support.libvirt_host import require_libvirt_python
from tests.support.process import admin_headers, serving, shoal_env
from tests.support.server import free_port

LATEST = {"OpenStack-API-Version": "container-infra latest"}


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s: {what}"
        time.sleep(0.3)


def nodes(c: httpx.Client, cluster: str) -> list[dict[str, Any]]:
    return list(c.get(f"/clusters/{cluster}/nodes").json()["nodes"])


def domains(host: LibvirtHost) -> list[str]:
    done = host.virsh("list", "--all", "--name")
    assert done.returncode == 0, done.stderr
    return sorted(filter(None, map(str.strip, done.stdout.splitlines())))


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_tiny_vms_boot_through_shoal_answer_and_go(
    libvirt_host: LibvirtHost, tmp_path: Path
) -> None:
    require_libvirt_python()
    setup = prepare(libvirt_host, tmp_path)
    env = shoal_env(
        tmp_path / "data",
        SHOAL_CONFIG=str(setup.config),
        SHOAL_CONDUCTOR_REQUEUE_SECONDS="0.5",
    )
    port = free_port()
    with serving(env, port, tmp_path / "serve.log"):
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(env), timeout=30
        )
        assert [p["name"] for p in c.get("/providers").json()["providers"]] == ["lv"]
        body = {
            "name": "vms",
            "image_id": IMAGE,
            "provider": "lv",
            "node_groups": [
                {"name": "m", "role": "master", "flavor_id": FLAVOR, "node_count": 1},
                {"name": "w", "flavor_id": FLAVOR, "node_count": 3},
            ],
        }
        r = c.post("/clusters", json=body)
        assert r.status_code == 202, r.text
        wait(
            lambda: c.get("/clusters/vms").json()["status"] == "CREATE_COMPLETE",
            240,
            f"create: {c.get('/clusters/vms').json().get('status_reason')}",
        )
        made = nodes(c, "vms")
        assert len(made) == 4 and all(n["address"] for n in made), made
        assert sorted(n["name"] for n in made) == domains(libvirt_host)
        assert len(setup.disks()) == 4  # one overlay per machine
        for n in made:
            # each VM answers on the address shoal reports, with its own node name...
            assert libvirt_host.wait_http(n["address"], timeout=60).strip() == n["name"]
            # ...and holds the user data shoal rendered for it (from the kernel command line)
            seed = libvirt_host.wait_http(n["address"], "/seed/user-data", timeout=10)
            assert seed.startswith("#cloud-config\n")
            identity = json.loads(json.loads(seed.split("\n", 1)[1])["write_files"][0]["content"])
            assert (identity["node"], identity["name"]) == (n["uuid"], n["name"])
            meta = libvirt_host.wait_http(n["address"], "/seed/meta-data", timeout=10)
            assert f"instance-id: {n['uuid']}" in meta

        assert {n["availability_zone"] for n in made} == {"h1"}
        victim = [n for n in made if n["nodegroup_name"] == "w"][1]
        r = c.post(
            "/clusters/vms/actions/resize",
            json={"node_count": 2, "nodegroup": "w", "nodes_to_remove": [victim["name"]]},
        )
        assert r.status_code == 202, r.text
        wait(lambda: victim["name"] not in domains(libvirt_host), 120, "the named VM to go")
        wait(lambda: c.get("/clusters/vms").json()["status"] == "UPDATE_COMPLETE", 120, "resize")
        left = {n["name"] for n in nodes(c, "vms")}
        assert left == {n["name"] for n in made} - {victim["name"]}  # exactly that one went
        assert sorted(left) == domains(libvirt_host)
        assert libvirt_host.http_get(victim["address"], timeout=1) is None
        for n in made:
            if n["name"] != victim["name"]:
                assert libvirt_host.http_get(n["address"]).strip() == n["name"]

        assert c.delete("/clusters/vms").status_code == 204
        wait(lambda: c.get("/clusters/vms").status_code == 404, 120, "cluster delete")
        assert domains(libvirt_host) == []
        assert setup.disks() == []  # the base disk only: no machine's disk is left


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_reboot_and_rebuild_keep_the_address_on_a_real_host(
    libvirt_host: LibvirtHost, tmp_path: Path
) -> None:
    """The driver alone on the real host: a reset guest and a rebuilt one come back on the
    same DHCP address (the MAC is the machine's own), and a host filled by another tenant
    after shoal looked fails the next machine instead of overbooking."""
    require_libvirt_python()
    from shoal.drivers.contract import BlockedKind, MachineSpec, MachineState
    from shoal.drivers.libvirt.driver import LibvirtDriver
    from shoal.settings import Settings

    setup = prepare(libvirt_host, tmp_path, cores=2, ram_mb=256)
    lv = Settings.from_env(env={"SHOAL_CONFIG": str(setup.config)}).providers[0].options
    driver = LibvirtDriver(lv)
    spec = MachineSpec("5e1f0000-0000-4000-8000-000000000001", "lv-reboot", "p", "c", "g",
                       "worker", FLAVOR, IMAGE, "h1", user_data="#!/bin/sh\necho hi\n")  # fmt: skip

    def up(timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            (m,) = driver.list_machines({"shoal-node": spec.machine_id})
            if m.state is MachineState.ACTIVE and m.address:
                return m.address
            assert time.monotonic() < deadline, m
            time.sleep(0.3)

    def boots() -> int:
        return libvirt_host.serial_log(spec.name).count("SHOAL-READY")

    try:
        driver.ensure_machine(spec)
        addr = up()
        assert libvirt_host.wait_http(addr, timeout=60).strip() == spec.name
        wait(lambda: boots() == 1, 60, "first boot's console line")
        assert "SHOAL-USERDATA rc=0" in libvirt_host.serial_log(spec.name)

        driver.reboot_machine(spec.machine_id)
        wait(lambda: boots() == 2, 120, "the guest to boot again after the reset")
        assert up() == addr and libvirt_host.wait_http(addr, timeout=60).strip() == spec.name

        driver.rebuild_machine(spec.machine_id, IMAGE)
        assert up() == addr
        assert libvirt_host.wait_http(addr, timeout=60).strip() == spec.name
        seed = libvirt_host.wait_http(addr, "/seed/user-data", timeout=10)
        assert seed == spec.user_data  # the rebuilt machine has the user data it was made with

        # 256 MiB for shoal on h1: 96 are this VM's; another tenant takes the rest meanwhile
        other = dataclasses.replace(spec, machine_id=str(uuid.uuid4()), name="lv-late")
        driver.list_machines({})
        conn = driver.hosts.connection("h1")
        tenant = conn.defineXML(libvirt_host.domain_xml("tenant", address=libvirt_host.address(80)))
        tenant.create()
        try:
            late = driver.ensure_machine(other)
            assert late.state is MachineState.ERROR
            assert late.fault_kind is BlockedKind.NO_VALID_HOST, late.fault
            assert not conn.lookupByUUIDString(other.machine_id).isActive()  # never started
        finally:
            tenant.destroy()
            tenant.undefine()
            driver.delete_machine(other.machine_id)
    finally:
        driver.delete_machine(spec.machine_id)
        driver.close()
    assert domains(libvirt_host) == [] and setup.disks() == []


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_a_disk_image_gets_its_user_data_as_a_nocloud_seed(
    libvirt_host: LibvirtHost, tmp_path: Path
) -> None:
    """An image that boots from its disk gets a `cidata` ISO (meta-data, user-data) beside
    its overlay, attached as a CD-ROM, as cloud-init's NoCloud reads it; both go with the
    machine. (The test's base disk is blank: the VM runs but boots nothing.)"""
    require_libvirt_python()
    import io
    import subprocess
    import xml.etree.ElementTree as ET

    import pycdlib

    from shoal.drivers.contract import MachineSpec
    from shoal.drivers.libvirt.driver import LibvirtDriver
    from shoal.settings import Settings
    from tests.harness.libvirt.provider import DISK_IMAGE

    setup = prepare(libvirt_host, tmp_path)
    lv = Settings.from_env(env={"SHOAL_CONFIG": str(setup.config)}).providers[0].options
    driver = LibvirtDriver(lv)
    user_data = "#cloud-config\n" + json.dumps({"hostname": "lv-disk"}) + "\n"
    spec = MachineSpec(str(uuid.uuid4()), "lv-disk", "p", "c", "g", "worker", FLAVOR,
                       DISK_IMAGE, "h1", user_data=user_data)  # fmt: skip
    try:
        driver.ensure_machine(spec)
        assert setup.disks() == sorted([f"{spec.machine_id}-seed.iso", f"{spec.machine_id}.qcow2"])
        iso = setup.pool_dir / f"{spec.machine_id}-seed.iso"
        blkid = subprocess.run(["blkid", "-o", "export", str(iso)], capture_output=True, text=True)
        assert "LABEL=cidata" in blkid.stdout and "TYPE=iso9660" in blkid.stdout, blkid
        reader = pycdlib.PyCdlib()
        reader.open(str(iso))
        try:
            got = {}
            for name in ("user-data", "meta-data"):
                out = io.BytesIO()
                reader.get_file_from_iso_fp(out, joliet_path=f"/{name}")
                got[name] = out.getvalue().decode()
        finally:
            reader.close()
        assert got["user-data"] == user_data
        assert got["meta-data"] == f"instance-id: {spec.machine_id}\nlocal-hostname: lv-disk\n"
        conn = driver.hosts.connection("h1")
        dom = conn.lookupByUUIDString(spec.machine_id)
        assert dom.isActive()
        cdrom = ET.fromstring(dom.XMLDesc(0)).find("devices/disk[@device='cdrom']/source")
        assert cdrom is not None and cdrom.get("file") == str(iso)
    finally:
        driver.delete_machine(spec.machine_id)
        driver.close()
    assert domains(libvirt_host) == [] and setup.disks() == []
