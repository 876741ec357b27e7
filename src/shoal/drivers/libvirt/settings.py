"""The libvirt driver's typed settings: a provider's `settings:` in the config file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.options import opt


@dataclass(frozen=True)
class LibvirtHostSettings:
    """One libvirt host of a provider: a zone and a target of its own."""

    name: str = opt("", "the host's name: the availability zone node groups name it by")
    uri: str = opt("", "libvirt URI: qemu:///system, qemu+ssh://host/system, test:///default")
    cores: int = opt(0, "vCPUs shoal may place on the host (its own accounting)")
    ram_mb: int = opt(0, "MiB of guest memory shoal may place on the host")
    disk_gb: int = opt(0, "GB of flavor disk shoal may place on the host (0: not counted)", lo=0)


@dataclass(frozen=True)
class LibvirtFlavor:
    """A machine size: what a node group's `flavor_id` names on a libvirt provider."""

    name: str = opt("", "the flavor's name")
    vcpus: int = opt(1, "virtual CPUs", lo=1, hi=4096)
    ram_mb: int = opt(1024, "guest memory in MiB", lo=16)
    disk_gb: int = opt(0, "size of the machine's disk in GB (0: the base image's size)", lo=0)


@dataclass(frozen=True)
class LibvirtImage:
    """A bootable image: a base disk in the storage pool (each machine gets a copy-on-write
    overlay of it), a kernel and initrd on the host, or both."""

    name: str = opt("", "the image's name (a node group's `image_id`)")
    disk: str | None = opt(None, "base disk: a volume name in the storage pool")
    kernel: str | None = opt(None, "a kernel file on the host (direct kernel boot)")
    initrd: str | None = opt(None, "an initrd file on the host, with `kernel`")
    cmdline: str = opt("", "kernel command line, with `kernel` (user data is added to it)")


LIBVIRT_FLAVORS = (
    LibvirtFlavor("m1.tiny", 1, 128, 1),
    LibvirtFlavor("m1.small", 1, 2048, 20),
    LibvirtFlavor("m1.medium", 2, 4096, 40),
    LibvirtFlavor("m1.large", 4, 8192, 80),
)


@dataclass(frozen=True)
class LibvirtSettings:
    """A set of libvirt hosts (driver `libvirt`): each host is a zone; shoal places
    machines on them with its own capacity accounting (libvirt refuses no overcommit)."""

    hosts: tuple[LibvirtHostSettings, ...] = opt((), "the hosts: name, uri, cores, ram_mb, disk_gb")
    network: str = opt("default", "the libvirt network machines join (DHCP hands out addresses)")
    pool: str = opt("default", "the storage pool of base disks and machines' overlays")
    flavors: tuple[LibvirtFlavor, ...] = opt(LIBVIRT_FLAVORS, "machine sizes by name")
    images: tuple[LibvirtImage, ...] = opt((), "bootable images by name")
    domain_type: str = opt("kvm", "libvirt domain type: kvm, or qemu (TCG, no /dev/kvm)")
    domain_template: str | None = opt(
        None, "file holding the domain XML template ({name} placeholders); default: built in"
    )
    console_dir: str | None = opt(
        None, "directory on the host for each machine's serial console log (default: a pty)"
    )
    scope: str = opt(
        "",
        "this deployment's name on hosts that other shoal deployments share: each lists "
        "(and sweeps) only the machines of its own scope",
    )
    uri_template: str | None = opt(
        None,
        "hosted: the provider's hosts are the virt hosts of each cluster (nodes of role=virt "
        "groups), reached at this URI ({name} and {address} filled in, e.g. "
        "qemu+ssh://root@{address}/system); its machines are the VMs of their vms",
    )
    cpu_allocation_ratio: float = opt(
        4.0,
        "hosted: vCPUs placed per physical CPU of a virt host (its size is read from the "
        "host; memory is never overcommitted)",
        lo=1.0,
        hi=64.0,
    )

    def problems(self) -> list[str]:
        """What is wrong with these settings, each as `key: message` (key relative)."""
        out: list[str] = []
        if not self.hosts and not self.uri_template:
            out.append("hosts: at least one host is required (or uri_template: hosted)")
        named: tuple[tuple[str, tuple[Any, ...]], ...] = (
            ("hosts", self.hosts),
            ("flavors", self.flavors),
            ("images", self.images),
        )
        for what, items in named:
            seen: set[str] = set()
            for i, item in enumerate(items):
                if not item.name:
                    out.append(f"{what}[{i}].name: a name is required")
                elif item.name in seen:
                    out.append(f"{what}[{i}].name: {item.name!r} is named twice")
                seen.add(item.name)
        for i, h in enumerate(self.hosts):
            if not h.uri:
                out.append(f"hosts[{i}].uri: a libvirt URI is required")
            for key in ("cores", "ram_mb"):
                if getattr(h, key) < 1:
                    out.append(f"hosts[{i}].{key}: the host's capacity is required (>= 1)")
        for i, im in enumerate(self.images):
            if not (im.disk or im.kernel):
                out.append(f"images[{i}]: an image needs a base `disk`, a `kernel`, or both")
            if im.initrd and not im.kernel:
                out.append(f"images[{i}].initrd: an initrd needs a `kernel`")
        if self.domain_type not in ("kvm", "qemu"):
            out.append(f"domain_type: {self.domain_type!r} is neither kvm nor qemu")
        return out
