"""What the libvirt driver promises beyond the shared contract, against libvirt's own test
driver (no daemon): placement over hosts with shoal's accounting, the domain XML from the
template, user data on the kernel command line (never the agent's token), disks deleted
with their domain, a lost connection, an unreachable host, a template that is not domain
XML or that reaches the host."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.domain import bootstrap
from shoal.drivers import contract, providers
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    MachineSpec,
    MachineState,
    PermanentError,
    PlacementGroup,
    PlacementPolicy,
    TransientError,
)
from shoal.drivers.libvirt.driver import LibvirtDriver
from shoal.drivers.libvirt.hosted import HostedLibvirtDriver
from shoal.drivers.libvirt.settings import LibvirtFlavor, LibvirtHostSettings
from shoal.drivers.libvirt.template import DEFAULT
from shoal.drivers.libvirt.testing import POOL, URI, ensure_base, foreign_domain, settings
from shoal.settings import ProviderSettings, Settings, SettingsError
from tests.support.libvirt_host import require_libvirt_python

pytestmark = pytest.mark.libvirt

NODE_XML = """<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>8</cores><threads>1</threads>
    <active>8</active><mhz>2000</mhz><model>x86_64</model></cpu>
  <memory>16777216</memory>
  <pool type='dir'><name>default-pool</name><target><path>/pool</path></target></pool>
  <network><name>default</name><bridge name='virbr0'/>
    <ip address='192.168.122.1' netmask='255.255.255.0'/></network>
</node>
"""
SMALL = LibvirtFlavor("s", vcpus=2, ram_mb=1024)
BIG = LibvirtFlavor("b", vcpus=4, ram_mb=6144)


@pytest.fixture
def conn() -> Iterator[Any]:
    libvirt = require_libvirt_python()
    c = libvirt.open(URI)
    ensure_base(c)
    yield c
    c.close()


@pytest.fixture
def make(tmp_path: Path, conn: Any) -> Iterator[Any]:
    """Drivers over test hosts; each test's machines are deleted at the end."""
    made: list[LibvirtDriver] = []

    def factory(**over: Any) -> LibvirtDriver:
        d = LibvirtDriver(settings(**over))
        made.append(d)
        return d

    yield factory
    for d in made:
        for m in d.list_machines({}):
            d.delete_machine(m.machine_id)
        d.close()


def two_hosts(tmp_path: Path) -> tuple[LibvirtHostSettings, ...]:
    """h1 and h2: two private test hosts (test:///<file>: a world per connection), 8
    cores and 8 GiB each for shoal."""
    node = tmp_path / "node.xml"
    node.write_text(NODE_XML)
    return tuple(
        LibvirtHostSettings(name, f"test://{node}", cores=8, ram_mb=8192) for name in ("h1", "h2")
    )


def spec(**over: Any) -> MachineSpec:
    mid = str(uuid.uuid4())
    values: dict[str, Any] = dict(
        machine_id=mid, name=f"lv-{mid[:8]}", project_id="p", cluster_id="c", nodegroup_id="g",
        role="worker", flavor_id="s", image_id="tiny-2", availability_zone=None,
    )  # fmt: skip
    values.update(over)
    return MachineSpec(**values)


def domain_xml(driver: LibvirtDriver, machine_id: str) -> ET.Element:
    m = driver.list_machines({contract.TAG_NODE: machine_id})[0]
    host = m.availability_zone
    assert host is not None
    dom = driver.hosts.call(host, lambda c: c.lookupByUUIDString(machine_id))
    return ET.fromstring(dom.XMLDesc(0))


def test_a_spec_naming_no_host_goes_to_the_emptiest(tmp_path: Path, make: Any) -> None:
    d = make(hosts=two_hosts(tmp_path), flavors=(SMALL, BIG))
    first = d.ensure_machine(spec(flavor_id="b"))
    second = d.ensure_machine(spec())
    third = d.ensure_machine(spec())
    assert first.availability_zone == "h1"  # both empty: the first listed
    assert second.availability_zone == "h2"  # h1 is 75 % full
    assert third.availability_zone == "h2"  # h2 at 25 % is still emptier than h1
    # h1's memory (6144 + 6144 of 8192 MiB) refuses a second b; h2 takes it, full then
    assert d.ensure_machine(spec(flavor_id="b")).availability_zone == "h2"
    with pytest.raises(BlockedError) as err:
        d.ensure_machine(spec(flavor_id="b"))
    assert err.value.kind is BlockedKind.NO_VALID_HOST and err.value.az is None
    assert "no host has room for b (4 cores, 6144 MiB)" in err.value.reason


def test_a_full_host_is_blocked_there_and_says_why(tmp_path: Path, make: Any) -> None:
    d = make(hosts=two_hosts(tmp_path), flavors=(SMALL, BIG))
    d.ensure_machine(spec(flavor_id="b", availability_zone="h2"))
    with pytest.raises(BlockedError) as err:
        d.ensure_machine(spec(flavor_id="b", availability_zone="h2"))
    assert (err.value.kind, err.value.az) == (BlockedKind.NO_VALID_HOST, "h2")
    assert "host h2 is full for b (4 cores, 6144 MiB): RAM MiB 12288 of 8192" in err.value.reason
    assert d.ensure_machine(spec(flavor_id="b", availability_zone="h1")).availability_zone == "h1"


def test_anti_affinity_keeps_a_groups_machines_on_different_hosts(
    tmp_path: Path, make: Any
) -> None:
    d = make(hosts=two_hosts(tmp_path), flavors=(SMALL, BIG))
    masters = PlacementGroup("shoal-masters", PlacementPolicy.ANTI_AFFINITY)
    zones = [d.ensure_machine(spec(placement_group=masters)).availability_zone for _ in "ab"]
    assert sorted(zones) == ["h1", "h2"]
    with pytest.raises(BlockedError, match="placement group shoal-masters"):
        d.ensure_machine(spec(placement_group=masters))
    with pytest.raises(BlockedError) as err:  # naming a host that holds one: that host
        d.ensure_machine(spec(placement_group=masters, availability_zone="h1"))
    assert err.value.az == "h1"
    workers = PlacementGroup("shoal-workers", PlacementPolicy.SOFT_ANTI_AFFINITY)
    spread = {d.ensure_machine(spec(placement_group=workers)).availability_zone for _ in "ab"}
    assert spread == {"h1", "h2"}
    assert d.ensure_machine(spec(placement_group=workers)).state is MachineState.BUILDING


def test_the_domain_is_the_node_with_the_flavors_sizes_and_shoals_tags(
    conn: Any, make: Any
) -> None:
    d = make(flavors=(SMALL, BIG))
    s = spec(flavor_id="b", availability_zone="h1", user_data="#cloud-config\n{}\n")
    d.ensure_machine(s)
    root = domain_xml(d, s.machine_id)
    assert root.findtext("uuid") == s.machine_id and root.findtext("name") == s.name
    assert root.findtext("vcpu") == "4"
    assert root.find("memory") is not None and root.findtext("memory") == str(6144 * 1024)
    meta = conn.lookupByUUIDString(s.machine_id).metadata(
        2, "https://shoal.dev/xmlns/1", 0
    )  # VIR_DOMAIN_METADATA_ELEMENT, without its namespace (libvirt 9.0)
    tags = {t.get("key"): t.text for t in ET.fromstring(meta).findall("tag")}
    assert tags == s.tags


def test_user_data_and_meta_data_ride_on_the_kernel_command_line(make: Any) -> None:
    d = make()
    user_data = "#cloud-config\n" + json.dumps({"hostname": "x", "write_files": []}) + "\n"
    s = spec(flavor_id="m1.small", image_id="tiny", availability_zone="h1", user_data=user_data)
    d.ensure_machine(s)
    line = domain_xml(d, s.machine_id).findtext("os/cmdline") or ""
    words = line.split()
    assert words[:2] == ["console=ttyS0", "ip=dhcp"]  # the image's own first
    assert f"ds=nocloud;i={s.machine_id};h={s.name}" in words
    encoded = next(w for w in words if w.startswith("shoal_user_data="))
    assert base64.b64decode(encoded.split("=", 1)[1]).decode() == user_data
    too_long = dataclasses.replace(s, machine_id=str(uuid.uuid4()), user_data="x" * 2000)
    with pytest.raises(PermanentError, match=r"kernel command line .* \(at most 2048\)"):
        d.ensure_machine(too_long)
    assert d.list_machines({contract.TAG_NODE: too_long.machine_id}) == []


def test_a_disk_image_gets_an_overlay_that_goes_with_the_domain(conn: Any, make: Any) -> None:
    d = make()
    pool = conn.storagePoolLookupByName(POOL)
    s = spec(flavor_id="m1.small", image_id="base-disk", availability_zone="h1")
    d.ensure_machine(s)
    overlay = pool.storageVolLookupByName(f"{s.machine_id}.qcow2")
    backing = ET.fromstring(overlay.XMLDesc(0)).findtext("backingStore/path") or ""
    assert backing.endswith("/contract-base.qcow2")
    disk = domain_xml(d, s.machine_id).find("devices/disk/source")
    assert disk is not None and disk.get("file") == overlay.path()
    d.delete_machine(s.machine_id)
    assert f"{s.machine_id}.qcow2" not in pool.listVolumes()
    assert d.list_machines({contract.TAG_NODE: s.machine_id}) == []
    missing = spec(flavor_id="m1.small", image_id="gone", availability_zone="h1")
    gone = dataclasses.replace(settings().images[0], name="gone", disk="nope.qcow2")
    d2 = make(images=(*settings().images, gone))
    with pytest.raises(PermanentError, match="base disk 'nope.qcow2' is not in storage pool"):
        d2.ensure_machine(missing)


def test_a_host_that_cannot_take_the_seed_refuses_and_keeps_nothing(conn: Any, make: Any) -> None:
    """A disk image's user data goes in a NoCloud seed ISO uploaded to the pool: the test
    driver cannot upload, so the create is refused for good and leaves no disk behind
    (the real host takes it: tests/e2e/test_libvirt_provider.py)."""
    d = make()
    s = spec(flavor_id="m1.small", image_id="base-disk", availability_zone="h1",
             user_data="#cloud-config\n{}\n")  # fmt: skip
    with pytest.raises(PermanentError, match="virStorageVolUpload"):
        d.ensure_machine(s)
    vols = conn.storagePoolLookupByName(POOL).listVolumes()
    assert not [v for v in vols if v.startswith(s.machine_id)]
    assert d.list_machines({contract.TAG_NODE: s.machine_id}) == []


def test_another_tenant_filling_the_host_after_shoal_looked_fails_the_machine(
    conn: Any, make: Any
) -> None:
    d = make()
    d.list_machines({})
    tenant = foreign_domain(conn, 65536)
    try:
        s = spec(flavor_id="m1.small", availability_zone="h1")
        d.ensure_machine(s)
        (m,) = d.list_machines({contract.TAG_NODE: s.machine_id})
        assert m.state is MachineState.ERROR and m.fault_kind is BlockedKind.NO_VALID_HOST
        assert m.fault is not None and m.fault.startswith("No valid host was found: host h1")
        assert not conn.lookupByUUIDString(s.machine_id).isActive()  # never started
    finally:
        tenant.destroy()
        tenant.undefine()


def test_a_lost_connection_is_transient_and_the_next_call_reconnects(make: Any) -> None:
    d = make()
    s = spec(flavor_id="m1.small", availability_zone="h1")
    d.ensure_machine(s)
    d.hosts.connection("h1").close()  # the daemon went away under shoal
    with pytest.raises(TransientError) as err:
        d.list_machines({})
    assert "libvirt host h1" in err.value.reason and err.value.retry_after is None
    assert [m.machine_id for m in d.list_machines({contract.TAG_NODE: s.machine_id})] == [
        s.machine_id
    ]


def test_an_unreachable_host_is_transient_and_named(tmp_path: Path) -> None:
    gone = LibvirtHostSettings("h9", f"qemu+unix:///system?socket={tmp_path}/no-sock", 8, 8192)
    d = LibvirtDriver(settings(hosts=(*settings().hosts, gone)))
    try:
        with pytest.raises(TransientError, match="libvirt host h9: Failed to connect socket"):
            d.check()
        with pytest.raises(TransientError, match="libvirt host h9"):
            d.list_machines({})
        with pytest.raises(TransientError, match="libvirt host h9"):  # it may be there
            d.delete_machine(str(uuid.uuid4()))
    finally:
        d.close()


def test_a_template_with_new_variables_and_a_broken_one(tmp_path: Path, make: Any) -> None:
    custom = tmp_path / "domain.xml"
    custom.write_text(
        DEFAULT.replace("<vcpu>{vcpus}</vcpu>", "<vcpu>{vcpus}</vcpu><title>{role}@{host}</title>")
    )
    d = make(domain_template=str(custom))
    s = spec(flavor_id="m1.small", availability_zone="h1", role="master")
    d.ensure_machine(s)
    assert domain_xml(d, s.machine_id).findtext("title") == "master@h1"

    broken = tmp_path / "broken.xml"
    broken.write_text(DEFAULT.replace("<vcpu>{vcpus}</vcpu>", "<vcpu>{cpus}</vcpu>"))
    ps = ProviderSettings("lv", "libvirt", settings(domain_template=str(broken)))
    with pytest.raises(SettingsError) as err:
        providers.build(Settings(data_dir=tmp_path, providers=(ps,), default_provider="lv"))
    assert "provider 'lv': domain_template" in str(err.value)
    assert "line 6: <vcpu> must be a positive whole number, not '': <vcpu></vcpu>" in str(err.value)


def test_deployments_sharing_a_host_see_only_their_own_but_count_all(make: Any) -> None:
    small = LibvirtHostSettings("h1", URI, cores=64, ram_mb=8192 + 2048 + 2048)  # 'test' 8 GiB
    a = make(hosts=(small,), scope="east")
    b = make(hosts=(small,), scope="west")
    mine = a.ensure_machine(spec(flavor_id="m1.small", availability_zone="h1"))
    assert [m.machine_id for m in a.list_machines({})] == [mine.machine_id]
    assert b.list_machines({}) == []  # west's sweeper never sees east's machine
    b.ensure_machine(spec(flavor_id="m1.small", availability_zone="h1"))
    with pytest.raises(BlockedError, match="RAM MiB 14336 of 12288"):  # east's counts too
        b.ensure_machine(spec(flavor_id="m1.small", availability_zone="h1"))


class ReadyHosts:
    """`contract.VirtHosts` as the database would give them: the ready hosts by cluster."""

    def __init__(self) -> None:
        self.by_cluster: dict[str, list[contract.VirtHost]] = {}

    def ready(self, cluster_id: str | None = None) -> list[contract.VirtHost]:
        if cluster_id is not None:
            return list(self.by_cluster.get(cluster_id, []))
        return [h for hosts in self.by_cluster.values() for h in hosts]


def test_hosted_vms_go_on_the_clusters_virt_hosts_sized_by_their_slot(tmp_path: Path) -> None:
    """uri_template: the hosts are a cluster's virt hosts, read when needed (no process
    is told them); a VM's size and template variables are its slot's; a host's size is
    read from the host."""
    require_libvirt_python()
    node = tmp_path / "node.xml"
    node.write_text(NODE_XML)  # 8 cores, 16 GiB: what getInfo reports
    hosted = settings(hosts=(), uri_template=f"test://{node}", cpu_allocation_ratio=1)
    ready = ReadyHosts()
    driver = HostedLibvirtDriver(hosted, ready)
    try:
        caps = driver.capabilities()
        assert caps.has(contract.Feature.HOSTED) and not caps.has(contract.Feature.REBUILD)
        template = DEFAULT.replace("<features>", "<description>{new_value}</description><features>")
        shape = contract.VmShape("g:0", vcpus=2, ram_mib=2048,
                                 variables={"new_value": "example", "unused": 1},
                                 template=template)  # fmt: skip
        s = spec(cluster_id="c1", availability_zone="h2", vm=shape)
        with pytest.raises(BlockedError, match="virt host h2 is not ready"):
            driver.ensure_machine(s)
        ready.by_cluster["c1"] = [
            contract.VirtHost("h1", "m-1", "sim"),
            contract.VirtHost("h2", "m-2", "sim"),
        ]
        made = driver.ensure_machine(s)
        assert made.availability_zone == "h2" and made.machine_id == s.machine_id
        d = domain_xml(driver, s.machine_id)
        assert d.findtext("vcpu") == "2" and d.findtext("memory") == "2097152"  # KiB
        assert d.findtext("description") == "example"
        listed = driver.list_machines({contract.TAG_CLUSTER: "c1"})
        assert [m.machine_id for m in listed] == [s.machine_id]
        assert [m.machine_id for m in driver.list_machines({})] == [s.machine_id]  # sweeper's
        assert driver.list_machines({contract.TAG_CLUSTER: "c2"}) == []  # c2 has no host
        big = contract.VmShape("g:1", vcpus=12, ram_mib=1024)
        with pytest.raises(BlockedError, match="full") as caught:
            driver.ensure_machine(spec(cluster_id="c1", availability_zone="h1", vm=big))
        assert caught.value.az == "h1" and "of 8" in caught.value.reason
        with pytest.raises(PermanentError, match="VM slot"):
            driver.ensure_machine(spec(cluster_id="c1", availability_zone="h1"))
        # The host as a value in the spec: a host the listing does not know yet.
        on_h3 = contract.VmShape("g:2", vcpus=1, ram_mib=512,
                                 host=contract.VirtHost("h3", "m-3", "sim"))  # fmt: skip
        third = spec(cluster_id="c1", availability_zone="h3", vm=on_h3)
        assert driver.ensure_machine(third).availability_zone == "h3"
        assert [m.machine_id for m in driver.list_machines({})] == [s.machine_id]  # h3: not ready
    finally:
        ready.by_cluster["c1"].append(contract.VirtHost("h3", "m-3", "sim"))
        for m in driver.list_machines({}):
            driver.delete_machine(m.machine_id)
        driver.close()


def test_any_process_sees_every_vm_of_the_virt_hosts(conn: Any) -> None:
    """No process is told which cluster has which hosts: a driver that made nothing
    (another process's, its sweeper's) lists, finds and deletes the VMs of every
    cluster's ready hosts, as the database gives them."""
    ready = ReadyHosts()
    ready.by_cluster["c1"] = [contract.VirtHost("v1", "m-1", "sim")]
    hosted = settings(hosts=(), uri_template=URI, scope="hosted-test")
    maker, sweeper = HostedLibvirtDriver(hosted, ready), HostedLibvirtDriver(hosted, ready)
    shape = contract.VmShape("g:0", vcpus=1, ram_mib=128)
    s = spec(cluster_id="c1", availability_zone="v1", vm=shape, image_id="tiny-2")
    builtin = conn.lookupByName("test")  # the test driver's own domain fills its 3 GiB
    builtin.destroy()
    try:
        maker.ensure_machine(s)
        assert [m.machine_id for m in sweeper.list_machines({})] == [s.machine_id]
        sweeper.delete_machine(s.machine_id)
        assert maker.list_machines({contract.TAG_CLUSTER: "c1"}) == []
    finally:
        for m in maker.list_machines({}):
            maker.delete_machine(m.machine_id)
        maker.close()
        sweeper.close()
        builtin.create()


def test_the_agent_token_is_never_in_the_domain_xml(make: Any) -> None:
    """A kernel image's user data rides on the kernel command line, which every process
    of the host and the guest can read, and the domain's metadata keeps it for a
    rebuild: the node agent's token is in neither."""
    d = make()
    s = spec(flavor_id="m1.small", image_id="tiny", availability_zone="h1")
    who = bootstrap.NodeIdentity(s.machine_id, s.name, "c", "g", "p", "worker")
    s = dataclasses.replace(s, user_data=bootstrap.user_data(who, "http://s", "tok-SECRET-1"))
    d.ensure_machine(s)
    xml = d.hosts.call("h1", lambda c: c.lookupByUUIDString(s.machine_id).XMLDesc(0))
    assert "tok-SECRET-1" not in xml
    line = ET.fromstring(xml).findtext("os/cmdline") or ""
    encoded = next(w for w in line.split() if w.startswith("shoal_user_data="))
    given = yaml.safe_load(base64.b64decode(encoded.split("=", 1)[1]).decode())
    identity = json.loads(given["write_files"][0]["content"])
    assert identity["name"] == s.name and "agent_token" not in identity  # the rest is there


def test_a_template_that_reaches_the_host_is_refused_at_start_and_at_define(
    tmp_path: Path, conn: Any
) -> None:
    """The allow-list holds for the provider's own file (the provider does not start)
    and, at the last moment, for a VM's template that reached the driver unchecked (one
    stored before the check existed): nothing is defined, nothing is left in the pool."""
    require_libvirt_python()
    shared = tmp_path / "shared.xml"
    fs = "<filesystem type='mount'><source dir='/'/><target dir='h'/></filesystem>"
    shared.write_text(DEFAULT.replace("<devices>", "<devices>" + fs))
    ps = ProviderSettings("lv", "libvirt", settings(domain_template=str(shared)))
    with pytest.raises(SettingsError, match="<filesystem> is not allowed"):
        providers.build(Settings(data_dir=tmp_path, providers=(ps,), default_provider="lv"))

    node = tmp_path / "node.xml"
    node.write_text(NODE_XML)
    ready = ReadyHosts()
    ready.by_cluster["c1"] = [contract.VirtHost("h1", "m-1", "sim")]
    driver = HostedLibvirtDriver(settings(hosts=(), uri_template=f"test://{node}"), ready)
    try:
        driver.list_machines({})  # reaches the cluster's hosts
        ensure_base(driver.hosts.connection("h1"))  # the overlay is made before the check
        evil = DEFAULT.replace("<devices>", "<devices>\n<hostdev mode='subsystem' type='pci'/>")
        shape = contract.VmShape("g:0", vcpus=1, ram_mib=512, template=evil)
        s = spec(cluster_id="c1", availability_zone="h1", vm=shape, image_id="tiny",
                 user_data="#cloud-config\n{}\n")  # fmt: skip
        with pytest.raises(PermanentError, match=r"line \d+: <hostdev> is not allowed"):
            driver.ensure_machine(s)
        assert driver.list_machines({}) == []
        host = driver.hosts.connection("h1")
        assert s.machine_id not in [dom.UUIDString() for dom in host.listAllDomains(0)]
        vols = host.storagePoolLookupByName(POOL).listVolumes()
        assert not [v for v in vols if v.startswith(s.machine_id)]
    finally:
        driver.close()
