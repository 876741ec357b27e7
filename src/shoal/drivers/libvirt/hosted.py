"""HostedLibvirtDriver: the libvirt driver whose hosts are the virt hosts of each
cluster (settings `uri_template`; feature HOSTED, `domain/virt.py`).

A VM's host travels as a value: its spec names it (`VmShape.host`), and a listing
asks `contract.VirtHosts` for the ready hosts of the cluster (of every cluster,
for the sweeper), read from shoal's database. The driver keeps no idea of its own
of which cluster has which hosts, so any process sees every VM; it keeps only a
connection per host it reached, at the URI `uri_template` makes of the host's name
and address. A VM's size is its slot's, and the host's size is read from the host.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from shoal.drivers.contract import (
    Feature,
    MachineSpec,
    VirtHost,
    VirtHosts,
    vm_host,
)
from shoal.drivers.libvirt.driver import LibvirtDriver
from shoal.drivers.libvirt.facts import Meta
from shoal.drivers.libvirt.settings import LibvirtHostSettings, LibvirtSettings

# No rebuild: a VM's template and variables are its virt group's, which the driver
# does not keep; the repair ladder goes from reboot to replace.
FEATURES = frozenset({Feature.REBOOT, Feature.HOSTED})


class HostedLibvirtDriver(LibvirtDriver):
    """The `libvirt` driver with `uri_template`: machines are VMs on virt hosts."""

    features = FEATURES

    def __init__(
        self,
        settings: LibvirtSettings,
        virt_hosts: VirtHosts,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(settings, clock)
        self.virt_hosts = virt_hosts

    def _reach(self, hosts: Sequence[VirtHost]) -> tuple[str, ...]:
        """The hosts' names, each reachable at the URI its name and address make (a
        connection per host, reopened when its address changes). No I/O."""
        template = self.settings.uri_template or ""
        for h in hosts:
            uri = template.format(name=h.name, address=h.address or "")
            self.hosts.add(LibvirtHostSettings(name=h.name, uri=uri))
            with self._lock:
                self._host_locks.setdefault(h.name, threading.Lock())
        return tuple(h.name for h in hosts)

    def _host_names(self, cluster_id: str | None = None) -> tuple[str, ...]:
        """The ready virt hosts of the cluster (of every cluster when None), now."""
        return self._reach(self.virt_hosts.ready(cluster_id or None))

    def _size(self, spec: MachineSpec) -> list[str]:
        """A VM's size is its slot's and its zone its host: nothing to check here."""
        return []

    def _target(self, spec: MachineSpec) -> None:
        """Permanent without a VM shape; Blocked while its host is not ready."""
        host = vm_host(spec, self.virt_hosts)
        self._reach([host])

    def _measure(self, host: str) -> None:
        """A virt host's size, from the host, once (vCPUs times cpu_allocation_ratio)."""
        self.hosts.measure(host, self.settings.cpu_allocation_ratio)

    def _foreign(self, meta: Meta, host: str) -> bool:
        """Virt hosts sharing one libvirtd (tests): each lists only its own VMs."""
        return bool(meta.host) and meta.host != host
