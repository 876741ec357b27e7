"""The libvirt test harness end to end: real tiny VMs through libvirt-python on a real libvirtd
in its own namespaces, and libvirt's in-process test driver (no daemon)."""

from __future__ import annotations

import fcntl
import ipaddress
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.harness.libvirt import SHOAL_XMLNS, LibvirtHost, no_daemon_uri, procs
from tests.harness.libvirt.host import SLOT_DIR
from tests.support.libvirt_host import require_libvirt_host, require_libvirt_python

NS = {"shoal": SHOAL_XMLNS}


def node_metadata(cluster: str, nodegroup: str, index: int) -> str:
    return (
        f'<shoal:node xmlns:shoal="{SHOAL_XMLNS}" index="{index}">'
        f"<shoal:cluster>{cluster}</shoal:cluster><shoal:nodegroup>{nodegroup}</shoal:nodegroup>"
        "</shoal:node>"
    )


def read_node_metadata(libvirt: Any, dom: Any, flags: int) -> dict[str, str]:
    # libvirt hands the element back without its namespace: <node index=..><cluster>..
    raw = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, SHOAL_XMLNS, flags)
    node = ET.fromstring(raw)
    assert node.tag == "node", raw
    return {
        "index": node.get("index", ""),
        "cluster": node.findtext("cluster", ""),
        "nodegroup": node.findtext("nodegroup", ""),
    }


def qemu_pids(host: LibvirtHost) -> list[int]:
    return [p.pid for p in host.processes() if p.comm.startswith("qemu")]


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} after {timeout:.0f}s"
        time.sleep(0.1)


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_two_tiny_vms_answer_on_their_addresses(
    libvirt_host: LibvirtHost, libvirt_conn: Any
) -> None:
    libvirt = require_libvirt_python()
    names = ["e2e-a", "e2e-b"]
    addresses = {name: libvirt_host.address(i) for i, name in enumerate(names)}
    try:
        for i, name in enumerate(names):
            xml = libvirt_host.domain_xml(
                name, address=addresses[name], metadata=node_metadata("c1", "workers", i)
            )
            assert "<domain type='qemu'>" in xml
            libvirt_conn.defineXML(xml).create()

        for name, address in addresses.items():
            ready = libvirt_host.wait_ready(name, timeout=180)
            assert (ready.node, ready.ip) == (name, address), libvirt_host.serial_log(name)
            # each VM answers on its own address with its own name
            assert libvirt_host.wait_http(address, timeout=30).strip() == name

        for i, name in enumerate(names):
            dom = libvirt_conn.lookupByName(name)
            assert dom.isActive()
            want = {"index": str(i), "cluster": "c1", "nodegroup": "workers"}
            for flags in (libvirt.VIR_DOMAIN_AFFECT_CONFIG, libvirt.VIR_DOMAIN_AFFECT_LIVE):
                assert read_node_metadata(libvirt, dom, flags) == want
            # and the domain's XML carries the element in shoal's namespace
            meta = ET.fromstring(dom.XMLDesc()).find("metadata/shoal:node", NS)
            assert meta is not None and meta.findtext("shoal:cluster", "", NS) == "c1"
        # metadata can be rewritten on a running domain, live and persistently: setMetadata
        # takes the element without a namespace, and a prefix + URI to put it in
        dom = libvirt_conn.lookupByName(names[1])
        dom.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT,
            '<node index="7"><cluster>c1</cluster><nodegroup>spares</nodegroup></node>',
            "shoal",
            SHOAL_XMLNS,
            libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_AFFECT_CONFIG,
        )
        for flags in (libvirt.VIR_DOMAIN_AFFECT_CONFIG, libvirt.VIR_DOMAIN_AFFECT_LIVE):
            assert read_node_metadata(libvirt, dom, flags) == {
                "index": "7",
                "cluster": "c1",
                "nodegroup": "spares",
            }
        assert len(qemu_pids(libvirt_host)) == 2
    finally:
        for name in names:
            try:
                dom = libvirt_conn.lookupByName(name)
            except libvirt.libvirtError:
                continue
            if dom.isActive():
                dom.destroy()
            dom.undefine()

    assert [d.name() for d in libvirt_conn.listAllDomains()] == []
    wait_until(lambda: not qemu_pids(libvirt_host), 30, "qemu processes left")
    for address in addresses.values():
        assert libvirt_host.http_get(address, timeout=1) is None


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_a_dhcp_guest_fetches_its_seed(libvirt_host: LibvirtHost, libvirt_conn: Any) -> None:
    seed = libvirt_host.workdir / "seed" / "n1"
    seed.mkdir(parents=True)
    (seed / "meta-data").write_text("instance-id: iid-e2e-1\nlocal-hostname: seeded-1\n")
    (seed / "user-data").write_text('#!/bin/sh\necho "user-data ran on $(hostname)" > /www/ud\n')
    server = libvirt_host.spawn_in_netns(
        [sys.executable, "-m", "http.server", "--bind", libvirt_host.gateway, "8080"],
        cwd=seed.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://{libvirt_host.gateway}:8080/n1/"
    xml = libvirt_host.domain_xml("e2e-seeded", node="", cmdline=f"shoal_url={url}")  # DHCP
    dom = libvirt_conn.defineXML(xml)
    try:
        dom.create()
        ready = libvirt_host.wait_ready("e2e-seeded", timeout=180)
        log = libvirt_host.serial_log("e2e-seeded")
        assert "SHOAL-SEED node=seeded-1 instance-id=iid-e2e-1" in log, log
        assert "SHOAL-USERDATA rc=0" in log, log
        assert ready.node == "seeded-1"
        assert ipaddress.ip_address(ready.ip) in libvirt_host.subnet
        assert libvirt_host.wait_http(ready.ip, "/ud").strip() == "user-data ran on seeded-1"
        leases = dom.interfaceAddresses(0)  # VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE
        assert [a["addr"] for i in leases.values() for a in i["addrs"]] == [ready.ip]
    finally:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
        server.terminate()
        server.wait(10)


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_a_second_host_runs_beside_and_stops_without_leftovers(
    libvirt_host: LibvirtHost,
) -> None:
    other = LibvirtHost(keep=False).start()
    try:
        assert other.slot != libvirt_host.slot
        assert other.subnet != libvirt_host.subnet and other.bridge != libvirt_host.bridge
        assert other.netns_id != libvirt_host.netns_id
        xml_path = other.workdir / "left.xml"
        xml_path.write_text(other.domain_xml("left-running", address=other.address(0)))
        assert other.virsh("define", str(xml_path)).returncode == 0
        assert other.virsh("start", "left-running").returncode == 0
        other.wait_ready("left-running", timeout=180)
        pids = [p.pid for p in other.processes()]
        assert {"libvirtd", "dnsmasq", "qemu-system-x86"} <= {p.comm for p in other.processes()}
    finally:
        other.stop()  # the VM is still running: stop() must take it down

    assert not other.workdir.exists()
    assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []
    assert other.workdir.name not in Path("/proc/self/mountinfo").read_text()
    assert subprocess.run(["ip", "link", "show", other.bridge], capture_output=True).returncode != 0
    with open(SLOT_DIR / f"{other.slot}.lock", "w") as lock:  # its slot is free again
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    # the session's host did not notice
    assert libvirt_host.virsh("net-info", libvirt_host.network).returncode == 0
    assert libvirt_host.processes()


@pytest.mark.libvirt
@pytest.mark.xdist_group("libvirt")
def test_a_killed_owner_takes_its_host_down() -> None:
    require_libvirt_host()
    # a process that starts a host, boots a VM, says where it is, then is SIGKILLed: no stop()
    script = textwrap.dedent(
        """
        import sys, time
        from tests.harness.libvirt import LibvirtHost
        host = LibvirtHost(keep=False).start()
        path = host.workdir / "orphan.xml"
        path.write_text(host.domain_xml("orphan", address=host.address(0)))
        assert host.virsh("define", str(path)).returncode == 0
        assert host.virsh("start", "orphan").returncode == 0
        print(host.workdir, host.netns_id, host.init_pid, flush=True)
        time.sleep(300)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    netns_fd = -1
    try:
        assert owner.stdout is not None
        assert select.select([owner.stdout], [], [], 120)[0], "the owner said nothing in 120s"
        line = owner.stdout.readline().split()
        assert len(line) == 3, "the owner did not start its host"
        workdir, netns_id, init_pid = Path(line[0]), line[1], int(line[2])
        # hold the namespace so that its id stays its own until the end of this test
        netns_fd = os.open(f"/proc/{init_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        assert f"net:[{os.fstat(netns_fd).st_ino}]" == netns_id

        def in_netns() -> list[str]:
            return [p.comm for p in procs.in_netns(netns_id)]

        wait_until(lambda: "qemu-system-x86" in in_netns(), 60, "no qemu in the owner's host")
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        wait_until(lambda: not in_netns(), 30, "processes left in a dead owner's namespace")
    finally:
        if netns_fd >= 0:
            os.close(netns_fd)
        if owner.poll() is None:
            owner.kill()
            owner.wait(10)
    # what is left is a work dir of files, which a later run may delete
    assert workdir.is_dir()
    shutil.rmtree(workdir)


@pytest.mark.libvirt
def test_the_test_driver_keeps_domains_and_metadata_without_a_daemon() -> None:
    libvirt = require_libvirt_python()
    conn = libvirt.open(no_daemon_uri())
    try:
        xml = f"""<domain type='test'>
  <name>contract-node-0</name>
  <metadata>{node_metadata("c9", "masters", 0)}</metadata>
  <memory unit='MiB'>96</memory>
  <os><type arch='x86_64'>hvm</type></os>
</domain>"""
        dom = conn.defineXML(xml)
        assert "contract-node-0" in [d.name() for d in conn.listAllDomains()]
        assert read_node_metadata(libvirt, dom, libvirt.VIR_DOMAIN_AFFECT_CONFIG) == {
            "index": "0",
            "cluster": "c9",
            "nodegroup": "masters",
        }
        dom.create()
        assert dom.isActive()
        dom.destroy()
        dom.undefine()
        with pytest.raises(libvirt.libvirtError) as err:
            conn.lookupByName("contract-node-0")
        assert err.value.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN
    finally:
        conn.close()
