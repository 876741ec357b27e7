"""The domain XML of a machine: a template (built in, or the provider's
`domain_template` file) rendered by `domain.xmlrender` from the machine's attributes.

Attributes a template may use: `name`, `uuid`, `domain_type`, `vcpus`, `memory_mib`,
`network`, `mac`, `host`, `flavor`, `image`, `role`, `project`, `cluster`,
`nodegroup`, `kernel`, `initrd`, `cmdline` (with the user data), `disk` (the overlay's
path), `seed` (the NoCloud seed ISO's path, for disk images), and four XML fragments
the driver writes: `metadata` (shoal's tags: a template must place it inside
`<metadata>`, or shoal cannot find its machines), `boot` (kernel, initrd and command
line, or boot from disk), `disks` (the overlay, and the seed as a CD-ROM), `console`.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from shoal.domain import bootstrap, vmtemplate, xmlallow, xmlrender
from shoal.drivers.contract import MachineSpec, PermanentError
from shoal.drivers.libvirt.settings import LibvirtFlavor, LibvirtImage, LibvirtSettings

FRAGMENTS = vmtemplate.FRAGMENTS
# x86's COMMAND_LINE_SIZE: a longer kernel command line is cut by the kernel.
CMDLINE_MAX = 2048
DEFAULT = vmtemplate.DEFAULT


def load(settings: LibvirtSettings) -> str:
    """The provider's template: its file, or the built-in one; checked once, so that a
    broken template stops the provider at start with the line that failed."""
    if not settings.domain_template:
        return DEFAULT
    path = Path(settings.domain_template)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"domain_template {path}: cannot read it ({exc.strerror})") from exc
    try:
        sample = _sample(settings)
        xml = xmlrender.render(text, sample, FRAGMENTS)
        xmlallow.check(xml, files_of(settings, sample))
    except xmlrender.TemplateError as exc:
        raise ValueError(f"domain_template {path}: {exc}") from exc
    if "{metadata}" not in text:
        raise ValueError(f"domain_template {path}: it must place {{metadata}} in <metadata>")
    return text


def _sample(settings: LibvirtSettings) -> Mapping[str, Any]:
    """The attributes of a made-up machine (the first flavor and image): every
    attribute the driver gives has a value, so what renders empty here is a placeholder
    the driver never fills."""
    flavor = settings.flavors[0] if settings.flavors else LibvirtFlavor("f")
    image = settings.images[0] if settings.images else LibvirtImage("i", kernel="/k")
    spec = MachineSpec("00000000-0000-0000-0000-000000000000", "check", "p", "c", "g",
                       "worker", flavor.name, image.name)  # fmt: skip
    d = Domain("host", flavor, image, "52:54:00:00:00:00", "/disk.qcow2", "")
    return attributes(settings, spec, d)


def mac_for(machine_id: str, taken: Collection[str]) -> str:
    """A locally administered MAC (QEMU's 52:54:00 prefix) derived from the machine id,
    so a rebuilt or re-made domain keeps its DHCP address; another one when taken."""
    for salt in range(256):
        digest = hashlib.sha256(f"{machine_id}:{salt}".encode()).digest()
        mac = "52:54:00:" + ":".join(f"{b:02x}" for b in digest[:3])
        if mac not in taken:
            return mac
    raise PermanentError(f"no free MAC address for {machine_id} on its host")


def cmdline(image: LibvirtImage, spec: MachineSpec) -> str:
    """The kernel command line of a kernel image: the image's own, NoCloud's meta-data
    (`ds=nocloud;i=<instance id>;h=<hostname>`, what cloud-init reads there) and the
    user data, base64, as `shoal_user_data=`, **without the node agent's token**: a
    command line is readable by every process of the guest and of the host (`ps`,
    /proc/<pid>/cmdline), so such a machine's agent has no token. PermanentError when
    it is too long."""
    parts = [image.cmdline.strip(), f"ds=nocloud;i={spec.machine_id};h={spec.name}"]
    if spec.user_data:
        data = bootstrap.without_agent_token(spec.user_data)
        parts.append("shoal_user_data=" + base64.b64encode(data.encode()).decode())
    line = " ".join(p for p in parts if p)
    if len(line) > CMDLINE_MAX:
        raise PermanentError(
            f"the kernel command line of image {image.name} would be {len(line)} bytes with "
            f"its user data (at most {CMDLINE_MAX}): use an image with a base disk"
        )
    return line


@dataclass(frozen=True)
class Domain:
    """What a machine's domain is made of, besides its spec."""

    host: str
    flavor: LibvirtFlavor
    image: LibvirtImage
    mac: str
    disk: str | None  # the overlay's path on the host
    metadata: str  # shoal's metadata element, namespaced
    seed: str | None = None  # the NoCloud seed ISO's path on the host (disk images)


def attributes(settings: LibvirtSettings, spec: MachineSpec, d: Domain) -> Mapping[str, Any]:
    """The attributes (and fragments) a template is rendered with."""
    im = d.image
    line = cmdline(im, spec) if im.kernel else ""
    boot = "<boot dev='hd'/>"
    if im.kernel:
        boot = f"<kernel>{escape(im.kernel)}</kernel>"
        boot += f"<initrd>{escape(im.initrd)}</initrd>" if im.initrd else ""
        boot += f"<cmdline>{escape(line)}</cmdline>"
    disks = ""
    if d.disk:
        disks = (
            "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
            f"<source file={quoteattr(d.disk)}/><target dev='vda' bus='virtio'/></disk>"
        )
    if d.seed:
        disks += (
            "<disk type='file' device='cdrom'><driver name='qemu' type='raw'/>"
            f"<source file={quoteattr(d.seed)}/><target dev='hdc' bus='ide'/><readonly/></disk>"
        )
    console = "<serial type='pty'><target port='0'/></serial>"
    if settings.console_dir:
        path = str(Path(settings.console_dir) / f"{spec.name}.console")
        console = f"<serial type='file'><source path={quoteattr(path)}/><target port='0'/></serial>"
    own = {
        "name": spec.name,
        "uuid": spec.machine_id,
        "domain_type": settings.domain_type,
        "vcpus": d.flavor.vcpus,
        "memory_mib": d.flavor.ram_mb,
        "network": settings.network,
        "mac": d.mac,
        "host": d.host,
        "flavor": d.flavor.name,
        "image": im.name,
        "role": spec.role,
        "project": spec.project_id,
        "cluster": spec.cluster_id,
        "nodegroup": spec.nodegroup_id,
        "kernel": im.kernel,
        "initrd": im.initrd,
        "cmdline": line,
        "disk": d.disk,
        "seed": d.seed,
        "metadata": d.metadata,
        "boot": boot,
        "disks": disks,
        "console": console,
    }
    return vmtemplate.variables(own, spec.vm.variables if spec.vm else None)


def files_of(settings: LibvirtSettings, attrs: Mapping[str, Any]) -> xmlallow.HostFiles:
    """The host files a machine's domain may name: its overlay and seed, its image's
    kernel and initrd, its console log."""
    console = None
    if settings.console_dir:
        console = str(Path(settings.console_dir) / f"{attrs['name']}.console")
    return xmlallow.HostFiles.of(disk=attrs["disk"], seed=attrs["seed"], kernel=attrs["kernel"],
                                 initrd=attrs["initrd"], console=console)  # fmt: skip


def render(template: str, settings: LibvirtSettings, spec: MachineSpec, d: Domain) -> str:
    """The domain XML, checked against the allow-list (`domain.xmlallow`) with the
    machine's own host files: the last check before libvirt defines it, whoever wrote
    the template and whenever. PermanentError (with the line) when the template breaks
    on it or names what is not allowed."""
    attrs = attributes(settings, spec, d)
    try:
        xml = xmlrender.render(template, attrs, FRAGMENTS)
        xmlallow.check(xml, files_of(settings, attrs))
    except xmlrender.TemplateError as exc:
        raise PermanentError(f"the domain template does not fit {spec.name}: {exc}") from exc
    return xml
