"""Which libvirt domain XML shoal defines: every rendered domain (an uploaded template,
a provider's `domain_template` file, the built-in one) is checked against an
allow-list of elements and attributes, when a template is uploaded and again just
before a driver defines the domain. Pure: no I/O, no libvirt.

Why an allow-list and not a deny-list: libvirt grows new ways to reach the host every
release (a host directory shared with `<filesystem>`, a PCI device with `<hostdev>`,
QEMU's raw arguments in `<qemu:commandline>`, a disk on `/etc/shadow`, an emulator of
the template's choosing, sVirt turned off with `<seclabel>`...). What is not written
in `ALLOWED` is refused, with the element, its line and why; docs/virt.md lists it.

A domain may name files of the host only where shoal made them for this machine
(`HostFiles`): its overlay and NoCloud seed ISO (volumes of the provider's storage
pool), its image's kernel and initrd, its console log. Nothing else: not another
machine's overlay in the same pool, not a path under the pool's directory.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from xml.parsers import expat

from shoal.domain.xmlrender import TemplateError

# What every device may carry besides its own attributes.
ADDRESS_ATTRS = ("type", "domain", "bus", "slot", "function", "multifunction", "controller",
                 "target", "unit", "port", "reg", "cssid", "ssid", "devno", "iobase", "irq",
                 "base")  # fmt: skip
RANDOM_SOURCES = frozenset({"/dev/urandom", "/dev/random"})


@dataclass(frozen=True)
class Rule:
    """What one element (by its path from `<domain>`) may carry."""

    attrs: frozenset[str] = frozenset()
    values: Mapping[str, frozenset[str]] = field(default_factory=dict)  # attr -> allowed values
    required: frozenset[str] = frozenset()  # attributes that must be given (no risky default)
    text: frozenset[str] | None = None  # allowed text, when it is restricted
    inert_below: bool = False  # `<metadata>`: libvirt stores what is below and acts on none


def _r(*attrs: str, required: Iterable[str] = (), text: Iterable[str] | None = None,
       inert: bool = False, **values: Iterable[str]) -> Rule:  # fmt: skip
    """A rule: `attrs` allowed with any value, `values` allowed with those values only."""
    vals = {k: frozenset(v) for k, v in values.items()}
    return Rule(frozenset(attrs) | frozenset(vals), vals, frozenset(required),
                None if text is None else frozenset(text), inert)  # fmt: skip


D, OS, F, DEV = "domain", "domain/os", "domain/features", "domain/devices"
STATE = _r("state")
LIFECYCLE = ("destroy", "restart", "preserve", "rename-restart")


def _device(path: str, rule: Rule, children: Mapping[str, Rule]) -> dict[str, Rule]:
    out = {path: rule, f"{path}/address": _r(*ADDRESS_ATTRS), f"{path}/alias": _r("name")}
    out.update({f"{path}/{k}": r for k, r in children.items()})
    return out


HYPERV = ("relaxed", "vapic", "vpindex", "runtime", "synic", "stimer", "reset", "frequencies",
          "reenlightenment", "tlbflush", "ipi", "evmcs", "avic")  # fmt: skip
IOTUNE = ("total_bytes_sec", "read_bytes_sec", "write_bytes_sec", "total_iops_sec",
          "read_iops_sec", "write_iops_sec")  # fmt: skip

ALLOWED: dict[str, Rule] = {
    D: _r(required=("type",), type=("kvm", "qemu")),
    f"{D}/name": _r(), f"{D}/uuid": _r(), f"{D}/title": _r(), f"{D}/description": _r(),
    f"{D}/genid": _r(),
    f"{D}/metadata": _r(inert=True),
    f"{D}/memory": _r("unit"), f"{D}/currentMemory": _r("unit"),
    f"{D}/maxMemory": _r("unit", "slots"),
    f"{D}/vcpu": _r("placement", "cpuset", "current"),
    f"{D}/iothreads": _r(),
    f"{D}/memoryBacking": _r(),
    f"{D}/memoryBacking/hugepages": _r(),
    f"{D}/memoryBacking/hugepages/page": _r("size", "unit", "nodeset"),
    f"{D}/memoryBacking/nosharepages": _r(), f"{D}/memoryBacking/locked": _r(),
    f"{D}/memoryBacking/discard": _r(),
    f"{D}/memoryBacking/source": _r(type=("anonymous", "memfd")),
    f"{D}/memoryBacking/allocation": _r("mode", "threads"),
    f"{D}/on_poweroff": _r(text=LIFECYCLE), f"{D}/on_reboot": _r(text=LIFECYCLE),
    f"{D}/on_crash": _r(text=LIFECYCLE),
    f"{D}/pm": _r(), f"{D}/pm/suspend-to-mem": _r("enabled"),
    f"{D}/pm/suspend-to-disk": _r("enabled"),
    # boot: a kernel and initrd only the image's (HostFiles.boot); no firmware file
    OS: _r(firmware=("efi", "bios")),
    f"{OS}/type": _r("arch", "machine", text=("hvm",)),
    f"{OS}/boot": _r("dev"), f"{OS}/bootmenu": _r("enable", "timeout"),
    f"{OS}/bios": _r("useserial", "rebootTimeout"),
    f"{OS}/kernel": _r(), f"{OS}/initrd": _r(), f"{OS}/cmdline": _r(),
    f"{OS}/firmware": _r(), f"{OS}/firmware/feature": _r("enabled", "name"),
    # features: CPU and platform switches, none names a host resource
    F: _r(),
    **{f"{F}/{k}": _r() for k in ("acpi", "pae", "privnet", "vmcoreinfo")},
    **{f"{F}/{k}": STATE for k in ("hap", "pmu", "vmport", "smm", "pvspinlock", "htm")},
    f"{F}/apic": _r("eoi"), f"{F}/ioapic": _r("driver"), f"{F}/gic": _r("version"),
    f"{F}/hyperv": _r("mode"),
    **{f"{F}/hyperv/{k}": STATE for k in HYPERV},
    f"{F}/hyperv/spinlocks": _r("state", "retries"),
    f"{F}/hyperv/vendor_id": _r("state", "value"),
    f"{F}/hyperv/stimer/direct": STATE,
    f"{F}/hyperv/tlbflush/direct": STATE, f"{F}/hyperv/tlbflush/extended": STATE,
    f"{F}/kvm": _r(),
    **{f"{F}/kvm/{k}": STATE for k in ("hidden", "hint-dedicated", "poll-control")},
    f"{F}/tcg": _r(), f"{F}/tcg/tb-cache": _r("unit"),
    f"{D}/cpu": _r("match", "check", "migratable",
                   mode=("host-passthrough", "host-model", "custom", "maximum")),
    f"{D}/cpu/model": _r("fallback", "vendor_id"), f"{D}/cpu/vendor": _r(),
    f"{D}/cpu/topology": _r("sockets", "dies", "clusters", "cores", "threads"),
    f"{D}/cpu/feature": _r("policy", "name"), f"{D}/cpu/cache": _r("level", "mode"),
    f"{D}/cpu/maxphysaddr": _r("mode", "bits"), f"{D}/cpu/numa": _r(),
    f"{D}/cpu/numa/cell": _r("id", "cpus", "memory", "unit", "discard"),
    f"{D}/clock": _r("offset", "adjustment", "basis", "timezone"),
    f"{D}/clock/timer": _r("name", "tickpolicy", "present", "track", "frequency", "mode"),
    f"{D}/clock/timer/catchup": _r("threshold", "slew", "limit"),
    # devices
    DEV: _r(),
    **_device(f"{DEV}/disk", _r(required=("type",), type=("file",), device=("disk", "cdrom")), {
        "driver": _r("cache", "io", "discard", "detect_zeroes", "queues", "iothread",
                     "error_policy", "rerror_policy", "copy_on_read",
                     name=("qemu",), type=("qcow2", "raw")),
        "source": _r("file", "startupPolicy", "index"),
        "target": _r("dev", "bus", "tray", "removable", "rotation_rate"),
        "readonly": _r(), "shareable": _r(), "serial": _r(), "wwn": _r(),
        "boot": _r("order", "loadparm"),
        "blockio": _r("logical_block_size", "physical_block_size"),
        "geometry": _r("cyls", "heads", "secs", "trans"),
        "iotune": _r(), **{f"iotune/{k}": _r() for k in IOTUNE},
    }),
    **_device(f"{DEV}/interface", _r(required=("type",), type=("network", "bridge")), {
        "source": _r("network", "bridge", "portgroup"), "mac": _r("address"),
        "model": _r("type"), "boot": _r("order"), "mtu": _r("size"), "link": _r("state"),
        "driver": _r("queues", "rx_queue_size", "tx_queue_size", "txmode",
                     name=("qemu", "vhost")),
        "bandwidth": _r(),
        "bandwidth/inbound": _r("average", "peak", "burst", "floor"),
        "bandwidth/outbound": _r("average", "peak", "burst"),
    }),
    **{k: r for dev in ("serial", "console") for k, r in _device(
        f"{DEV}/{dev}", _r(required=("type",), type=("pty", "file", "null")), {
            "source": _r("path"), "target": _r("port", "type"), "target/model": _r("name"),
        }).items()},  # fmt: skip
    **_device(f"{DEV}/channel", _r(required=("type",), type=("unix", "spicevmc")), {
        "source": _r(mode=("bind",)), "target": _r("name", "state", type=("virtio",)),
    }),
    **_device(f"{DEV}/input", _r(required=("type",), type=("tablet", "mouse", "keyboard"),
                                 bus=("usb", "ps2", "virtio")), {}),  # fmt: skip
    **_device(f"{DEV}/graphics", _r("port", "autoport", "listen", "keymap", "passwd",
                                    "passwdValidTo", "connected", "tlsPort", "defaultMode",
                                    "sharePolicy", "websocket", required=("type",),
                                    type=("vnc", "spice")), {
        "listen": _r("address", "network", type=("address", "network", "none")),
        "image": _r("compression"), "channel": _r("name", "mode"),
    }),  # fmt: skip
    **_device(f"{DEV}/video", _r(), {
        "model": _r("vram", "heads", "primary", "ram", "vgamem", "vram64",
                    type=("vga", "cirrus", "virtio", "qxl", "bochs", "ramfb", "none")),
    }),
    **_device(f"{DEV}/controller", _r("index", "model", "ports", "vectors", required=("type",),
                                      type=("usb", "pci", "virtio-serial", "scsi", "sata",
                                            "ide")), {
        "driver": _r("queues", "iothread", "cmd_per_lun", "max_sectors", "ioeventfd"),
        "target": _r("chassisNr", "chassis", "port", "busNr", "index", "hotplug"),
        "model": _r("name"), "master": _r("startport"),
    }),  # fmt: skip
    **_device(f"{DEV}/memballoon", _r("autodeflate", "freePageReporting",
                                      model=("virtio", "none")), {"stats": _r("period")}),
    **_device(f"{DEV}/rng", _r(model=("virtio",)), {
        "backend": _r(model=("random",), text=RANDOM_SOURCES), "rate": _r("period", "bytes"),
    }),
    **_device(f"{DEV}/watchdog", _r("model", action=("reset", "shutdown", "poweroff", "pause",
                                                     "none", "inject-nmi")), {}),
    **_device(f"{DEV}/panic", _r("model"), {}),
    **_device(f"{DEV}/tpm", _r(model=("tpm-tis", "tpm-crb")), {
        "backend": _r("version", required=("type",), type=("emulator",)),
    }),
}  # fmt: skip

# Why the elements people ask for most are refused (any other: not in the list).
REFUSED: dict[str, str] = {
    "filesystem": "it shares a host directory with the guest",
    "hostdev": "it passes a host device (PCI, USB, SCSI, mdev) to the guest",
    "redirdev": "it redirects a USB device into the guest",
    "smartcard": "it passes the host's smartcard reader or certificate files to the guest",
    "shmem": "it shares host memory with the guest",
    "memory": "a memory device (nvdimm, virtio-pmem) maps a host file into the guest",
    "emulator": "it runs a host program of the template's choosing",
    "bootloader": "it runs a host program to boot the guest",
    "seclabel": "it changes or turns off the host's confinement of the VM (sVirt)",
    "sysinfo": "fwcfg entries read host files into the guest",
    "loader": "it names a host firmware file (use <os firmware='efi'>)",
    "nvram": "it names a host file for firmware variables (use <os firmware='efi'>)",
    "backingStore": "it names a backing file on the host",
    "vsock": "it opens a socket between the guest and the host",
    "parallel": "it connects the guest to a host file, device or socket",
    "audio": "a host audio backend writes host files",
    "lease": "it names a lock file on the host",
    "log": "it writes a host file",
    "acceleration": "it gives the guest the host's GPU",
    "gl": "it gives the guest the host's GPU",
    "rom": "it loads a host file as the device's ROM",
    "smbios": "it copies the host's hardware identity into the guest",
    "dtb": "it names a host file", "acpi": "it names host files as ACPI tables",
    "script": "it runs a host program when the interface comes up",
    "virtualport": "it plugs the guest into a host switch port of the template's choosing",
    "resource": "it moves the VM to a host cgroup of the template's choosing",
    "idmap": "it maps host users into the guest",
}  # fmt: skip


@dataclass(frozen=True)
class HostFiles:
    """The host files a machine's domain may name: those shoal made or chose for it."""

    disks: Mapping[str, str] = field(default_factory=dict)  # path -> its format (qcow2, raw)
    boot: frozenset[str] = frozenset()  # the image's kernel and initrd
    consoles: frozenset[str] = frozenset()  # the machine's console log

    @classmethod
    def of(cls, *, disk: str | None = None, seed: str | None = None, kernel: str | None = None,
           initrd: str | None = None, console: str | None = None) -> HostFiles:  # fmt: skip
        disks = {p: f for p, f in ((disk, "qcow2"), (seed, "raw")) if p}
        boot = frozenset(p for p in (kernel, initrd) if p)
        return cls(disks, boot, frozenset({console} if console else ()))


@dataclass
class _El:
    uri: str
    local: str
    prefix: str
    attrs: dict[str, str]
    line: int
    text: list[str] = field(default_factory=list)
    children: list[_El] = field(default_factory=list)

    @property
    def shown(self) -> str:
        return f"{self.prefix}:{self.local}" if self.prefix else self.local

    def child(self, local: str) -> _El | None:
        return next((c for c in self.children if not c.uri and c.local == local), None)


def _split(name: str) -> tuple[str, str, str]:
    """expat's `uri local prefix` (namespace_prefixes) as (uri, local, prefix)."""
    parts = name.split(" ")
    if len(parts) == 1:
        return "", parts[0], ""
    if len(parts) == 2:
        return parts[0], parts[1], ""
    return parts[0], parts[1], parts[2]


def _parse(xml: str) -> _El:
    """The element tree, names resolved against their namespaces (whatever the prefix),
    with each start tag's line. A DOCTYPE (entities, external ones included) is refused."""
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.namespace_prefixes = True
    stack: list[_El] = []
    root: list[_El] = []

    def doctype(*_args: object) -> None:
        raise TemplateError(parser.CurrentLineNumber, "a DOCTYPE (entities) is not allowed")

    def start(name: str, attrs: dict[str, str]) -> None:
        uri, local, prefix = _split(name)
        el = _El(uri, local, prefix, attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(el)
        stack.append(el)

    def end(_name: str) -> None:
        stack.pop()

    def data(text: str) -> None:
        if stack:
            stack[-1].text.append(text)

    parser.StartDoctypeDeclHandler = doctype
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = data
    try:
        parser.Parse(xml, True)
    except expat.ExpatError as exc:
        raise TemplateError(exc.lineno or 1, f"not well-formed XML ({expat.ErrorString(exc.code)})",
                            _line(xml, exc.lineno or 1)) from exc  # fmt: skip
    if not root:
        raise TemplateError(1, "the template is empty")
    return root[0]


def _line(xml: str, line: int) -> str:
    lines = xml.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _one_of(values: Collection[str]) -> str:
    return ", ".join(repr(v) for v in sorted(values))


def check(xml: str, files: HostFiles) -> None:
    """TemplateError naming the first element (its line and why) of `xml` that is not
    in `ALLOWED`, or that names a host file `files` does not hold."""
    root = _parse(xml)

    def fail(el: _El, message: str) -> TemplateError:
        return TemplateError(el.line, message, _line(xml, el.line))

    def walk(el: _El, parent: str) -> None:
        if el.uri:
            raise fail(el, f"<{el.shown}> is in namespace {el.uri}: elements of another "
                           "namespace (QEMU's raw arguments, another driver's) are allowed "
                           "only inside <metadata>")  # fmt: skip
        path = f"{parent}/{el.local}" if parent else el.local
        rule = ALLOWED.get(path)
        if rule is None:
            why = REFUSED.get(el.local, "it is not in shoal's allow-list of domain elements")
            raise fail(el, f"<{el.shown}> is not allowed here ({path}): {why} (docs/virt.md)")
        for attr, value in el.attrs.items():
            uri, local, prefix = _split(attr)
            shown = f"{prefix}:{local}" if prefix else local
            if uri or local not in rule.attrs:
                raise fail(el, f"<{el.shown} {shown}=...> is not allowed: {el.shown} may carry "
                               f"{_one_of(rule.attrs) or 'no attribute'}")  # fmt: skip
            allowed = rule.values.get(local)
            if allowed is not None and value not in allowed:
                raise fail(el, f"<{el.shown} {local}={value!r}> is not allowed: {local} must "
                               f"be one of {_one_of(allowed)}")  # fmt: skip
        for attr in sorted(rule.required - el.attrs.keys()):
            raise fail(el, f"<{el.shown}> must say its {attr} (one of "
                           f"{_one_of(rule.values.get(attr, ()))})")  # fmt: skip
        text = "".join(el.text).strip()
        if rule.text is not None and text not in rule.text:
            raise fail(el, f"<{el.shown}>{text}</{el.shown}> is not allowed: it must be one "
                           f"of {_one_of(rule.text)}")  # fmt: skip
        _files(el, path, text, files, fail)
        if rule.inert_below:
            return
        for c in el.children:
            walk(c, path)

    walk(root, "")


def _files(
    el: _El, path: str, text: str, files: HostFiles, fail: Callable[[_El, str], TemplateError]
) -> None:
    """The host files an element names must be the machine's own."""
    if path in (f"{OS}/kernel", f"{OS}/initrd") and text and text not in files.boot:
        raise fail(el, f"<{el.local}> {text!r} is not the image's {el.local}: a domain boots "
                       "only the kernel and initrd of its image")  # fmt: skip
    if path == f"{DEV}/disk":
        source = el.child("source")
        given = source.attrs.get("file", "") if source is not None else ""
        if not given:
            return  # an empty drive (a CD-ROM with no medium)
        fmt = files.disks.get(given)
        if fmt is None:
            raise fail(source or el, f"<source file={given!r}> is not a disk shoal made for this "
                               "machine: a domain uses only its own overlay and seed ISO "
                               "(volumes of shoal's storage pool)")  # fmt: skip
        driver = el.child("driver")
        said = driver.attrs.get("type") if driver is not None else None
        if said != fmt:
            raise fail(driver or el, f"disk {given!r} is {fmt}: its <driver> must say "
                                     f"type={fmt!r}, not {said!r}")  # fmt: skip
    if path in (f"{DEV}/serial", f"{DEV}/console"):
        source = el.child("source")
        given = source.attrs.get("path", "") if source is not None else ""
        if el.attrs.get("type") == "file" and given not in files.consoles:
            raise fail(source or el, f"<{el.local} type='file'> may write only the machine's "
                                     f"console log, not {given!r} (set the provider's "
                                     "console_dir)")  # fmt: skip
        if el.attrs.get("type") != "file" and source is not None:
            raise fail(source, f"<{el.local} type={el.attrs.get('type')!r}> takes no <source>")
