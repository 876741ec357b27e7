"""shoal's own capacity accounting for libvirt hosts (libvirt refuses no overcommit).
Pure: it sees plain values from a listing, never a connection.

A host's use is every domain shoal made there (running or not: it holds its place
until it is deleted) plus every other domain that runs. A machine fits when cores,
memory and (if the host counts it) disk stay within what the operator gave the host.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from shoal.drivers.libvirt.facts import Facts
from shoal.drivers.libvirt.settings import LibvirtFlavor, LibvirtHostSettings


@dataclass(frozen=True)
class Use:
    """What is placed on one host, and its members per placement group."""

    cores: int = 0
    ram_mb: int = 0
    disk_gb: int = 0
    groups: tuple[str, ...] = ()  # the placement group of each shoal machine there

    def plus(self, flavor: LibvirtFlavor, group: str = "") -> Use:
        return Use(
            self.cores + flavor.vcpus,
            self.ram_mb + flavor.ram_mb,
            self.disk_gb + flavor.disk_gb,
            (*self.groups, group) if group else self.groups,
        )


def use_of(domains: Iterable[tuple[Facts, bool]], flavors: dict[str, LibvirtFlavor]) -> Use:
    """The use of a host from its domains (facts, running?)."""
    use = Use()
    for facts, running in domains:
        if facts.meta is None and not running:
            continue
        flavor = flavors.get(facts.meta.flavor) if facts.meta else None
        disk = flavor.disk_gb if flavor else 0
        group = facts.meta.placement_group if facts.meta else ""
        use = use.plus(LibvirtFlavor("", facts.vcpus, facts.memory_mib, disk), group)
    return use


def over(host: LibvirtHostSettings, use: Use) -> str | None:
    """Why `use` does not fit on `host` (numbers for a person), or None when it fits."""
    for what, used, cap in (
        ("cores", use.cores, host.cores),
        ("RAM MiB", use.ram_mb, host.ram_mb),
        ("disk GB", use.disk_gb, host.disk_gb or None),
    ):
        if cap is not None and used > cap:
            return f"{what} {used} of {cap}"
    return None


def load(host: LibvirtHostSettings, use: Use) -> float:
    """How full `host` is: its fullest resource, as a fraction."""
    parts = [use.cores / host.cores, use.ram_mb / host.ram_mb]
    if host.disk_gb:
        parts.append(use.disk_gb / host.disk_gb)
    return max(parts)


def choose(
    hosts: Sequence[LibvirtHostSettings],
    uses: dict[str, Use],
    flavor: LibvirtFlavor,
    group: str = "",
    strict: bool = False,
) -> tuple[str | None, str]:
    """The host for a machine of `flavor` when the spec names none: among hosts where it
    fits, the fewest members of its placement `group` first (none at all when
    `strict`: anti-affinity), then the emptiest after placing it, then the order the
    hosts are listed in. (None, why) when no host can take it."""
    fits = []
    for i, h in enumerate(hosts):
        after = uses[h.name].plus(flavor, group)
        if over(h, after) is not None:
            continue
        members = uses[h.name].groups.count(group) if group else 0
        if strict and members:
            continue
        fits.append((members, load(h, after), i, h.name))
    if fits:
        return min(fits)[3], ""
    if strict and group:
        return None, f"every host with room already holds a machine of placement group {group}"
    return None, "no host has room for " + describe(flavor)


def describe(flavor: LibvirtFlavor) -> str:
    disk = f", {flavor.disk_gb} GB disk" if flavor.disk_gb else ""
    return f"{flavor.name} ({flavor.vcpus} cores, {flavor.ram_mb} MiB{disk})"
