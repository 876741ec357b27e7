"""A shoal `libvirt` provider on a running LibvirtHost: a storage pool with a base disk,
the tiny guest as an image, and the config file `shoal serve` reads (SHOAL_CONFIG).

The guest boots from its kernel and initrd; each machine still gets a copy-on-write
overlay of the base disk, as a real image's machine would, so that a test can see disks
made and deleted. The domain template is the driver's built-in one plus the 16 MiB TCG
translation cache the harness uses (~200 -> ~164 MiB RSS per VM): an operator's template.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.harness.libvirt.domain import TB_CACHE_MIB
from tests.harness.libvirt.host import HostError, LibvirtHost

POOL = "shoal-pool"
BASE = "tiny-base.qcow2"
IMAGE = "tiny"
DISK_IMAGE = "blank"  # boots from its disk (an empty one: it never gets far), seed ISO
FLAVOR = "tiny"
CMDLINE = "console=ttyS0 quiet no_timer_check ip=dhcp"


@dataclass(frozen=True)
class ProviderSetup:
    """What a test or benchmark needs to run shoal on the host."""

    config: Path  # the YAML file for SHOAL_CONFIG
    pool_dir: Path  # where the base disk and the machines' overlays live
    template: Path

    def disks(self) -> list[str]:
        """The machines' disk files in the pool (the base disk excluded)."""
        return sorted(p.name for p in self.pool_dir.iterdir() if p.name != BASE)


def ensure_pool(host: LibvirtHost) -> Path:
    """The dir pool `shoal-pool` in the host's work dir, with a 64 MiB qcow2 base disk."""
    pool_dir = host.workdir / "pool"
    if host.virsh("pool-info", POOL).returncode == 0:
        return pool_dir
    pool_dir.mkdir(exist_ok=True)
    done = subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", str(pool_dir / BASE), "64M"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise HostError(f"qemu-img create: {done.stderr.strip()}")
    for args in (
        ("pool-define-as", POOL, "dir", "--target", str(pool_dir)),
        ("pool-start", POOL),
    ):
        done = host.virsh(*args)
        if done.returncode != 0:
            raise HostError(f"virsh {' '.join(args)}: {done.stderr.strip()}")
    return pool_dir


def template_text() -> str:
    from shoal.drivers.libvirt.template import DEFAULT

    tcg = f"<tcg><tb-cache unit='MiB'>{TB_CACHE_MIB}</tb-cache></tcg>"
    return DEFAULT.replace("<features><acpi/></features>", f"<features><acpi/>{tcg}</features>")


def prepare(
    host: LibvirtHost,
    workdir: Path,
    *,
    cores: int = 8,
    ram_mb: int = 2048,
    concurrency_per_target: int = 4,
    name: str = "lv",
) -> ProviderSetup:
    """The pool on `host` and, in `workdir`, the template and config of provider `name`
    with one host `h1` of `cores` and `ram_mb` for shoal's accounting."""
    pool_dir = ensure_pool(host)
    template = workdir / "domain.xml"
    template.write_text(template_text())
    consoles = host.workdir / "vms"
    consoles.mkdir(exist_ok=True)
    config = workdir / "shoal.yaml"
    config.write_text(
        f"""providers:
  - name: {name}
    driver: libvirt
    concurrency: {concurrency_per_target}
    concurrency_per_target: {concurrency_per_target}
    settings:
      hosts:
        - {{name: h1, uri: "{host.uri}", cores: {cores}, ram_mb: {ram_mb}}}
      network: {host.network}
      pool: {POOL}
      domain_type: qemu
      domain_template: {template}
      console_dir: {consoles}
      flavors:
        - {{name: {FLAVOR}, vcpus: 1, ram_mb: 96}}
      images:
        - name: {IMAGE}
          disk: {BASE}
          kernel: {host.kernel}
          initrd: {host.initrd}
          cmdline: "{CMDLINE}"
        - {{name: {DISK_IMAGE}, disk: {BASE}}}
"""
    )
    return ProviderSetup(config, pool_dir, template)
