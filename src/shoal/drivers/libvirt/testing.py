"""The libvirt driver under the contract suite: libvirt's in-process test driver
(`test:///default`: no daemon, no root), one host `h1` of 64 cores and 64 GiB.

The test driver keeps one world per process, so the harness deletes what the test
made (and the domains it provoked with) when it closes. Errors are provoked the way a
real host makes them: another tenant's domain fills the host, either before shoal
looked (no valid host at create) or just after (shoal finds it when it checks the host
right after defining, and fails its machine with "No valid host was found"). libvirt
has no quota and gives no retry-after hint: those two provocations skip and say so.
The suite's own libvirt tests (tests/contract/test_libvirt_driver.py) use the same
settings and helpers.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from shoal.drivers.contract import MachineSpec
from shoal.drivers.harness import (
    ContractHarness,
    DriverHarness,
    Provocation,
    Unavailable,
    Unsupported,
)
from shoal.drivers.libvirt.settings import LibvirtHostSettings, LibvirtImage, LibvirtSettings

URI = "test:///default"
POOL = "default-pool"  # the test driver's own pool
BASE = "contract-base.qcow2"
HOST = LibvirtHostSettings("h1", URI, cores=64, ram_mb=65536)


def settings(**over: Any) -> LibvirtSettings:
    values: dict[str, Any] = dict(
        hosts=(HOST,),
        network="default",
        pool=POOL,
        domain_type="qemu",
        images=(
            LibvirtImage("tiny", kernel="/guest/vmlinuz", initrd="/guest/initrd.gz",
                         cmdline="console=ttyS0 ip=dhcp", disk=BASE),
            LibvirtImage("tiny-2", kernel="/guest/vmlinuz-2", cmdline="console=ttyS0"),
            LibvirtImage("base-disk", disk=BASE),
        ),
    )  # fmt: skip
    values.update(over)
    return LibvirtSettings(**values)


def ensure_base(conn: Any) -> None:
    pool = conn.storagePoolLookupByName(POOL)
    if BASE not in pool.listVolumes():
        pool.createXML(
            f"<volume><name>{BASE}</name><capacity>1073741824</capacity>"
            "<target><format type='qcow2'/></target></volume>",
            0,
        )


def foreign_domain(conn: Any, ram_mb: int) -> Any:
    """Another tenant's running domain on the host, `ram_mb` big (not shoal's)."""
    name = f"tenant-{uuid.uuid4().hex[:8]}"
    dom = conn.defineXML(
        f"<domain type='qemu'><name>{name}</name><memory unit='MiB'>{ram_mb}</memory>"
        "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os></domain>"
    )
    dom.create()
    return dom


def libvirt_module() -> ModuleType:
    """libvirt-python, errors raising without noise on stderr (Unavailable without it)."""
    try:
        import libvirt
    except ImportError as exc:
        raise Unavailable(
            f"libvirt-python is not importable ({exc}): ./run test installs the libvirt extra"
            " once libvirt-dev and pkg-config are installed"
        ) from exc
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    module: ModuleType = libvirt
    return module


def libvirt_harness(tmp_path: Path) -> DriverHarness:
    """The driver on libvirt's test driver (`tmp_path` unused: it keeps no files)."""
    from shoal.drivers.libvirt.driver import LibvirtDriver

    conn = libvirt_module().open(URI)
    ensure_base(conn)
    driver = LibvirtDriver(settings())
    tenants: list[Any] = []

    def provoke(kind: Provocation, spec: MachineSpec) -> MachineSpec:
        if kind in CANNOT:
            raise Unsupported(CANNOT[kind])
        if kind is Provocation.NO_VALID_HOST_ASYNC:
            driver.list_machines({})  # shoal has looked at h1: it has room
            tenants.append(foreign_domain(conn, HOST.ram_mb))  # then someone fills it
        else:
            tenants.append(foreign_domain(conn, HOST.ram_mb))
            driver.list_machines({})  # shoal sees the host full
        return spec

    def close() -> None:
        try:
            for m in driver.list_machines({}):
                driver.delete_machine(m.machine_id)
            for dom in tenants:
                dom.destroy()
                dom.undefine()
        finally:
            driver.close()
            conn.close()

    return DriverHarness(
        driver=driver,
        flavor="m1.small",
        image="tiny",  # the test driver cannot upload a seed ISO: kernel images only here
        other_image="tiny-2",
        zone="h1",
        advance=lambda s: None,  # the test driver boots at once: nothing to wait for
        boot_timeout=5.0,
        close=close,
        provoke=provoke,
    )


CANNOT = {
    Provocation.QUOTA: "libvirt has no quotas: a full host is its only refusal",
    Provocation.TRANSIENT: "libvirt gives no retry-after hint; a lost connection is transient "
    "without one (tests/contract/test_libvirt_driver.py)",
}
HARNESSES = {"libvirt": ContractHarness(libvirt_harness, marks=("libvirt",), cannot=CANNOT)}
