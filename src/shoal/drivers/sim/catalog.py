"""The sim cloud's fixed catalog: flavors and images a real private cloud offers.

Availability zones are part of the (mutable) config, not of the catalog, so that
tests can add or fill a zone; the catalog is static and lives in memory, which
keeps `validate` free of I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flavor:
    """A machine size. `gpus`, `local_ssd` and `baremetal` mark the special kinds."""

    name: str
    vcpus: int
    ram_mb: int
    disk_gb: int
    gpus: int = 0
    local_ssd: bool = False
    baremetal: bool = False


@dataclass(frozen=True)
class Image:
    """A bootable image; `os_distro` is what Magnum templates call it."""

    name: str
    os_distro: str


FLAVORS: dict[str, Flavor] = {
    f.name: f
    for f in (
        Flavor("m1.small", vcpus=1, ram_mb=2048, disk_gb=20),
        Flavor("m1.medium", vcpus=2, ram_mb=4096, disk_gb=40),
        Flavor("m1.large", vcpus=4, ram_mb=8192, disk_gb=80),
        Flavor("g1.large", vcpus=8, ram_mb=32768, disk_gb=100, gpus=1),
        Flavor("s1.large", vcpus=4, ram_mb=16384, disk_gb=400, local_ssd=True),
        Flavor("bm.large", vcpus=32, ram_mb=131072, disk_gb=960, baremetal=True),
    )
}

IMAGES: dict[str, Image] = {
    i.name: i
    for i in (
        Image("fedora-coreos-40", os_distro="fedora-coreos"),
        Image("fedora-coreos-41", os_distro="fedora-coreos"),
        Image("ubuntu-24.04", os_distro="ubuntu"),
        Image("ubuntu-22.04", os_distro="ubuntu"),
    )
}

DEFAULT_AZS: tuple[str, ...] = ("az-1", "az-2", "az-3")
