"""The libvirt driver's pure parts: shoal's capacity accounting, the domain facts and
metadata it reads back, and the error table (no libvirt needed)."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.drivers.contract import BlockedKind, PermanentError, TransientError
from shoal.drivers.libvirt import errors, facts, placement, template
from shoal.drivers.libvirt.facts import Facts, Meta
from shoal.drivers.libvirt.settings import LibvirtFlavor, LibvirtHostSettings

H1 = LibvirtHostSettings("h1", "test:///default", cores=8, ram_mb=8192, disk_gb=100)
H2 = LibvirtHostSettings("h2", "test:///default", cores=8, ram_mb=8192)
SMALL = LibvirtFlavor("s", 2, 2048, 20)
BIG = LibvirtFlavor("b", 4, 6144, 60)


def meta(flavor: str = "s", group: str = "", fault: str = "") -> Meta:
    return Meta({"shoal-node": "n"}, flavor, "img", "h1", 1.0, group, fault,
                BlockedKind.NO_VALID_HOST if fault else None)  # fmt: skip


def dom(vcpus: int, mib: int, m: Meta | None = None) -> Facts:
    return Facts("u", "n", vcpus, mib, ("52:54:00:00:00:01",), m)


def test_use_counts_shoals_domains_in_any_state_and_others_only_running() -> None:
    flavors = {"s": SMALL}
    use = placement.use_of(
        [
            (dom(2, 2048, meta()), False),  # shoal's, not running: holds its place
            (dom(1, 512), True),  # another tenant's, running
            (dom(4, 4096), False),  # another tenant's, off: takes nothing
        ],
        flavors,
    )
    assert (use.cores, use.ram_mb, use.disk_gb) == (3, 2560, 20)


def test_over_names_the_first_resource_that_does_not_fit() -> None:
    assert placement.over(H1, placement.Use(8, 8192, 100)) is None
    assert placement.over(H1, placement.Use(9, 100, 0)) == "cores 9 of 8"
    assert placement.over(H1, placement.Use(1, 9000, 0)) == "RAM MiB 9000 of 8192"
    assert placement.over(H1, placement.Use(1, 1, 101)) == "disk GB 101 of 100"
    assert placement.over(H2, placement.Use(1, 1, 10**6)) is None  # disk not counted


def test_choose_the_emptiest_with_room_then_the_listed_order() -> None:
    empty = {"h1": placement.Use(), "h2": placement.Use()}
    assert placement.choose([H1, H2], empty, SMALL) == ("h1", "")
    busy = {"h1": placement.Use(2, 2048), "h2": placement.Use()}
    assert placement.choose([H1, H2], busy, SMALL) == ("h2", "")
    full = {"h1": placement.Use(8, 8192), "h2": placement.Use(6, 6144)}
    assert placement.choose([H1, H2], full, SMALL) == ("h2", "")
    assert placement.choose([H1, H2], full, BIG) == (None, "no host has room for b "
                                                     "(4 cores, 6144 MiB, 60 GB disk)")  # fmt: skip


def test_choose_keeps_a_placement_group_apart() -> None:
    uses = {"h1": placement.Use(groups=("g",)), "h2": placement.Use(4, 4096)}
    assert placement.choose([H1, H2], uses, SMALL, "g") == ("h2", "")  # soft: apart first
    both = {"h1": placement.Use(groups=("g",)), "h2": placement.Use(groups=("g", "g"))}
    assert placement.choose([H1, H2], both, SMALL, "g") == ("h1", "")  # then the fewest
    host, why = placement.choose([H1, H2], both, SMALL, "g", strict=True)
    assert host is None and "placement group g" in why


def test_metadata_reads_back_from_the_domain_xml() -> None:
    tags = {"shoal-node": "n1", "shoal-cluster": "c<&>"}
    fault = "No valid host was found: x"
    m = Meta(tags, "s", "img", "h1", 12.5, "grp", fault, BlockedKind.NO_VALID_HOST, "master", "#c")
    xml = (
        "<domain type='kvm'><name>n1</name><uuid>ABC</uuid><memory unit='GiB'>2</memory>"
        f"<vcpu>3</vcpu><metadata>{m.xml()}</metadata><os><type>hvm</type></os>"
        "<devices><interface type='network'><mac address='52:54:00:AA:BB:CC'/></interface>"
        "<disk type='file' device='disk'><source file='/p/x.qcow2'/></disk></devices></domain>"
    )
    f = facts.parse(xml)
    assert (f.uuid, f.name, f.vcpus, f.memory_mib) == ("abc", "n1", 3, 2048)
    assert f.macs == ("52:54:00:aa:bb:cc",) and f.disks == ("/p/x.qcow2",)
    assert f.meta == m
    assert facts.parse(xml.replace(m.xml(), "")).meta is None  # not shoal's
    bare = m.xml(namespaced=False)
    assert bare.startswith("<machine version='1'><tag key=")  # for setMetadata


def test_the_mac_is_the_machines_own_unless_taken() -> None:
    a = template.mac_for("m-1", ())
    assert a.startswith("52:54:00:") and a == template.mac_for("m-1", ())
    assert template.mac_for("m-1", {a}) not in (a,)


class FakeLibvirtError(Exception):
    """An exception shaped like libvirt.libvirtError (code and message)."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code, self.msg = code, msg

    def get_error_code(self) -> int:
        return self.code

    def get_error_message(self) -> str:
        return self.msg


@pytest.mark.parametrize(
    ("code", "cls", "dropped"),
    [
        (38, TransientError, True),  # socket gone
        (6, TransientError, True),  # invalid connection
        (45, TransientError, True),  # authentication failed
        (1, TransientError, False),  # internal error
        (87, TransientError, False),  # busy
        (9999, TransientError, False),  # unknown: retried, with its code
        (27, PermanentError, False),  # bad XML
        (50, PermanentError, False),  # no such volume
        (43, PermanentError, False),  # no such network
    ],
)
def test_errors_are_mapped_at_the_edge(code: int, cls: type[Any], dropped: bool) -> None:
    exc = FakeLibvirtError(code, "it broke")
    mapped = errors.classify(exc, "h1")
    assert type(mapped) is cls
    assert mapped.reason.startswith("libvirt host h1: it broke (")
    assert errors.is_connection_error(exc) is dropped


def test_a_start_without_memory_is_no_valid_host() -> None:
    fault, no_room = errors.start_fault(FakeLibvirtError(1, "qemu: Cannot allocate memory"), "h1")
    assert no_room and fault.startswith("No valid host was found: host h1 cannot start it")
    fault, no_room = errors.start_fault(FakeLibvirtError(38, "no such kernel"), "h1")
    assert not no_room and "could not start it: no such kernel" in fault
