"""The domain XML template of a machine: the built-in one, the variables shoal gives
every machine, and the check an uploaded template must pass. Pure (rendering is
`xmlrender`'s).

Variables shoal gives: `name`, `uuid`, `domain_type`, `vcpus`, `memory_mib`,
`network`, `mac`, `host`, `flavor`, `image`, `role`, `project`, `cluster`,
`nodegroup`, `kernel`, `initrd`, `cmdline`, `disk`, `seed`, and four XML fragments
the driver writes: `metadata` (shoal's tags: a template must place it inside
`<metadata>`, or shoal cannot find its machines), `boot`, `disks`, `console`. A VM
of a virt host (`domain/virt.py`) adds its `vms` entry's keys (`cpu`, `ram`, any
other); shoal's own variables win over an entry's keys of the same name.

Every rendered domain must also pass `xmlallow.check` (no host files, devices or raw
QEMU arguments): here for the made-up machine, whose only host files are `SAMPLE`'s
disk, kernel and initrd; the driver checks again with the machine's own files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.domain import xmlallow, xmlrender

FRAGMENTS = ("metadata", "boot", "disks", "console")

DEFAULT = """<domain type='{domain_type}'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <metadata>{metadata}</metadata>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    {boot}
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    {disks}
    <interface type='network'>
      <source network='{network}'/>
      <mac address='{mac}'/>
      <model type='virtio'/>
    </interface>
    {console}
    <memballoon model='none'/>
  </devices>
</domain>
"""

# A made-up machine: every variable shoal gives has a value.
SAMPLE: Mapping[str, Any] = {
    "name": "check", "uuid": "00000000-0000-0000-0000-000000000000", "domain_type": "qemu",
    "vcpus": 1, "memory_mib": 1024, "network": "default", "mac": "52:54:00:00:00:00",
    "host": "host", "flavor": "vm", "image": "image", "role": "worker", "project": "p",
    "cluster": "c", "nodegroup": "g", "kernel": "/k", "initrd": "/i", "cmdline": "",
    "disk": "/disk.qcow2", "seed": None,
    "metadata": "<shoal:machine xmlns:shoal='https://shoal.dev/xmlns/1'/>",
    "boot": "<boot dev='hd'/>", "disks": "", "console": "",
}  # fmt: skip
# The host files the made-up machine may name (a template's own paths are refused).
SAMPLE_FILES = xmlallow.HostFiles.of(
    disk=SAMPLE["disk"], seed=SAMPLE["seed"], kernel=SAMPLE["kernel"], initrd=SAMPLE["initrd"]
)


def variables(own: Mapping[str, Any], entry: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a template is rendered with: a VM's entry, under shoal's own variables."""
    return {**(entry or {}), **own}


def check(template: str, entries: Sequence[Mapping[str, Any]] = ()) -> None:
    """TemplateError (with the line) unless `template` renders into a domain for a
    made-up machine and for each of `entries` (VMs' variables) that passes the
    allow-list (`xmlallow`), and places `{metadata}`."""
    if "{metadata}" not in template:
        raise xmlrender.TemplateError(1, "the template must place {metadata} inside <metadata>")
    for entry in entries or ({},):
        own = dict(SAMPLE)
        if "cpu" in entry:
            own["vcpus"] = entry["cpu"]
        xml = xmlrender.render(template, variables(own, entry), FRAGMENTS)
        xmlallow.check(xml, SAMPLE_FILES)
