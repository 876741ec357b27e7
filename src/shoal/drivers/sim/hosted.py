"""HostedSimDriver: a sim provider whose machines are VMs on the virt hosts of each
cluster (feature HOSTED, `domain/virt.py`). The hosts are servers of the same
world (machines of a virt node group); each VM is rendered into domain XML from
its slot's variables and its virt group's template (or the built-in one),
exactly as the libvirt driver renders it, and kept with the VM (`vms.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from shoal.domain import vmtemplate, xmlallow, xmlrender
from shoal.drivers.contract import (
    Capabilities,
    Feature,
    Machine,
    MachineSpec,
    PermanentError,
    VirtHost,
    VirtHosts,
    vm_host,
)
from shoal.drivers.sim import catalog
from shoal.drivers.sim.driver import SimDriver, _edge
from shoal.drivers.sim.servers import SimServer
from shoal.drivers.sim.world import SimWorld

FEATURES = frozenset({Feature.REBOOT, Feature.REBUILD, Feature.HOSTED})
XMLNS = "https://shoal.dev/xmlns/1"


class HostedSimDriver(SimDriver):
    """The `sim` driver with `hosted: true`: machines are VMs on virt hosts."""

    def __init__(self, world: SimWorld, virt_hosts: VirtHosts) -> None:
        super().__init__(world)
        self.features = FEATURES
        self.virt_hosts = virt_hosts

    def capabilities(self) -> Capabilities:
        """The hosts' names are the zones (the ready hosts of every cluster)."""
        zones = sorted({h.name for h in self.virt_hosts.ready()})
        return Capabilities(
            availability_zones=tuple(zones),
            flavors=(),
            images=tuple(catalog.IMAGES),
            features=self.features,
            zones_are_targets=True,
            restart_seconds=self.world.cached().config.restart_real_seconds(),
            pace_seconds=self.world.cached().config.pace_real_seconds(),
        )

    def validate(self, spec: MachineSpec) -> list[str]:
        """An unknown image or option; a spec without its VM shape (a machine here is
        a VM of a virt host: its node group must take slots of the cluster's `vms`)."""
        problems = []
        if spec.image_id not in catalog.IMAGES:
            known = ", ".join(catalog.IMAGES)
            problems.append(f"image {spec.image_id!r} does not exist (images: {known})")
        for key in sorted(spec.options):
            problems.append(f"option {key!r} is not an option of the sim driver (it has none)")
        return problems

    def ensure_machine(self, spec: MachineSpec) -> Machine:
        """Idempotent on machine_id. Blocked while the host is not ready or is full;
        Permanent for a spec without a VM shape, an unknown image or a template that
        does not render."""
        host = vm_host(spec, self.virt_hosts)
        xml = render(spec, host)
        server: SimServer = _edge(
            lambda: self.world.api("create_vm", spec.machine_id, spec, host.machine_id, xml)
        )
        return server.as_machine()

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        """As the sim's, after failing the VMs of hosts that went down."""
        _edge(self.world.fail_vms_of_down_hosts)
        return super().list_machines(tags)


def render(spec: MachineSpec, host: VirtHost) -> str:
    """The VM's domain XML: its slot's variables under shoal's own; PermanentError
    naming the line when its template does not render into a domain."""
    vm = spec.vm
    assert vm is not None
    disk = f"/var/lib/sim/{spec.machine_id}.qcow2"
    tags = "".join(
        f"<shoal:tag key={quoteattr(k)}>{escape(v)}</shoal:tag>" for k, v in spec.tags.items()
    )
    own: dict[str, Any] = {
        "name": spec.name, "uuid": spec.machine_id, "domain_type": "qemu",
        "vcpus": vm.vcpus, "memory_mib": vm.ram_mib, "network": "default",
        "mac": mac_for(spec.machine_id), "host": host.name, "flavor": "vm",
        "image": spec.image_id, "role": spec.role, "project": spec.project_id,
        "cluster": spec.cluster_id, "nodegroup": spec.nodegroup_id, "kernel": None,
        "initrd": None, "cmdline": "", "disk": disk, "seed": None,
        "metadata": f"<shoal:machine xmlns:shoal='{XMLNS}'>{tags}</shoal:machine>",
        "boot": "<boot dev='hd'/>",
        "disks": "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
        f"<source file={quoteattr(disk)}/><target dev='vda' bus='virtio'/></disk>",
        "console": "<serial type='pty'><target port='0'/></serial>",
    }  # fmt: skip
    template = vm.template or vmtemplate.DEFAULT
    try:
        xml = xmlrender.render(
            template, vmtemplate.variables(own, vm.variables), vmtemplate.FRAGMENTS
        )
        xmlallow.check(xml, xmlallow.HostFiles.of(disk=disk))  # as libvirt's driver does
        return xml
    except xmlrender.TemplateError as exc:
        raise PermanentError(f"the domain template does not fit VM {spec.name}: {exc}") from exc


def mac_for(machine_id: str) -> str:
    digest = hashlib.sha256(machine_id.encode()).digest()
    return "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])
