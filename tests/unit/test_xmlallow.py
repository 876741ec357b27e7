"""The allow-list every rendered domain passes before libvirt defines it: a table of
domains that must pass and of domains that must be refused, each refusal naming its
element (and line), on plain strings."""

from __future__ import annotations

import pytest

from shoal.domain import vmtemplate, xmlallow, xmlrender
from shoal.domain.xmlrender import TemplateError

FILES = xmlallow.HostFiles.of(
    disk="/pool/m.qcow2",
    seed="/pool/m-seed.iso",
    kernel="/boot/vmlinuz",
    initrd="/boot/initrd.gz",
    console="/var/log/shoal/m.console",
)
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
OS_LINE, TOP_LINE, DEVICE_LINE = 6, 8, 10


def domain(devices: str = "", os_extra: str = "", top: str = "", kind: str = "kvm") -> str:
    """A small domain; what is given lands on a known line (OS_LINE, TOP_LINE, DEVICE_LINE)."""
    return "\n".join([
        f"<domain type='{kind}'>",
        "<name>m</name>",
        "<metadata><shoal:machine xmlns:shoal='https://shoal.dev/xmlns/1'/></metadata>",
        "<memory unit='MiB'>512</memory>",
        "<os><type arch='x86_64' machine='pc'>hvm</type>",
        os_extra,
        "</os>",
        top,
        "<devices>",
        devices,
        "</devices>",
        "</domain>",
    ])  # fmt: skip


OVERLAY = ("<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
           "<source file='/pool/m.qcow2'/><target dev='vda' bus='virtio'/></disk>")  # fmt: skip
SEED_CDROM = ("<disk type='file' device='cdrom'><driver name='qemu' type='raw'/>"
              "<source file='/pool/m-seed.iso'/><target dev='hdc' bus='ide'/>"
              "<readonly/></disk>")  # fmt: skip

ALLOWED = {
    "the overlay and the seed": domain(OVERLAY + SEED_CDROM),
    "an empty CD-ROM drive": domain("<disk type='file' device='cdrom'><target dev='hdc'/></disk>"),
    "the image's kernel and initrd": domain(
        os_extra="<kernel>/boot/vmlinuz</kernel><initrd>/boot/initrd.gz</initrd>"
        "<cmdline>console=ttyS0</cmdline>"
    ),
    "UEFI chosen by libvirt": domain(top="", os_extra="<boot dev='hd'/>").replace(
        "<os>", "<os firmware='efi'>"
    ),
    "a network and a bridge": domain(
        "<interface type='network'><source network='default'/><model type='virtio'/>"
        "</interface><interface type='bridge'><source bridge='br0'/></interface>"
    ),
    "a pty console and the console log": domain(
        "<serial type='pty'><target port='0'/></serial><console type='pty'/>"
        "<serial type='file'><source path='/var/log/shoal/m.console'/><target port='1'/></serial>"
    ),
    "the guest agent's channel": domain(
        "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
    ),
    "graphics, video, input, rng, tpm, watchdog": domain(
        "<graphics type='vnc' autoport='yes'><listen type='address' address='127.0.0.1'/>"
        "</graphics><video><model type='virtio' heads='1'/></video>"
        "<input type='tablet' bus='usb'/><rng model='virtio'><backend model='random'>"
        "/dev/urandom</backend></rng><tpm model='tpm-crb'><backend type='emulator' "
        "version='2.0'/></tpm><watchdog model='i6300esb' action='reset'/>"
        "<controller type='usb' model='qemu-xhci'/><memballoon model='virtio'/>"
    ),
    "CPU, features, clock": domain(
        top="<cpu mode='host-passthrough'><topology sockets='1' cores='2' threads='1'/></cpu>"
        "<features><acpi/><apic/><hyperv mode='custom'><relaxed state='on'/></hyperv>"
        "</features><clock offset='utc'><timer name='rtc' tickpolicy='catchup'/></clock>"
        "<on_crash>restart</on_crash>"
    ),
    "anything inside <metadata>, QEMU's namespace included": domain().replace(
        "</metadata>",
        f"<qemu:commandline xmlns:qemu='{QEMU_NS}'><qemu:arg value='-x'/></qemu:commandline>"
        "</metadata>",
    ),
}

# (domain, what the message must name, the line)
REFUSED = {
    "a host directory": (
        domain("<filesystem type='mount'><source dir='/'/><target dir='host'/></filesystem>"),
        "<filesystem>", DEVICE_LINE),
    "a PCI device": (
        domain("<hostdev mode='subsystem' type='pci'><source><address domain='0' bus='1' "
               "slot='0' function='0'/></source></hostdev>"), "<hostdev>", DEVICE_LINE),
    "a redirected USB device": (domain("<redirdev bus='usb' type='tcp'/>"), "<redirdev>",
                                DEVICE_LINE),
    "the host's smartcard": (domain("<smartcard mode='host'/>"), "<smartcard>", DEVICE_LINE),
    "shared memory": (domain("<shmem name='x'/>"), "<shmem>", DEVICE_LINE),
    "an nvdimm on a host file": (
        domain("<memory model='nvdimm'><source><path>/etc/shadow</path></source></memory>"),
        "<memory>", DEVICE_LINE),
    "an emulator of the template's choosing": (
        domain("<emulator>/bin/sh</emulator>"), "<emulator>", DEVICE_LINE),
    "QEMU's raw arguments": (
        domain(top=f"<qemu:commandline xmlns:qemu='{QEMU_NS}'><qemu:arg value='-x'/>"
                   "</qemu:commandline>"), "<qemu:commandline>", TOP_LINE),
    "QEMU's raw arguments under another prefix": (
        domain(top=f"<q:commandline xmlns:q='{QEMU_NS}'/>"), QEMU_NS, TOP_LINE),
    "QEMU's raw arguments as the default namespace": (
        domain(top=f"<commandline xmlns='{QEMU_NS}'/>"), "<commandline> is in namespace",
        TOP_LINE),
    "an attribute of another namespace": (
        domain("<input xmlns:x='urn:x' x:evil='1' type='tablet'/>"), "x:evil", DEVICE_LINE),
    "a disk on /etc/shadow": (
        domain("<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
               "<source file='/etc/shadow'/><target dev='vdb'/></disk>"), "/etc/shadow",
        DEVICE_LINE),
    "another machine's overlay in the pool": (
        domain(OVERLAY.replace("m.qcow2", "other.qcow2")), "/pool/other.qcow2", DEVICE_LINE),
    "a host block device": (
        domain("<disk type='block' device='disk'><source dev='/dev/sda'/></disk>"),
        "<disk type='block'>", DEVICE_LINE),
    "a network disk": (
        domain("<disk type='network'><source protocol='nbd' name='x'/></disk>"),
        "<disk type='network'>", DEVICE_LINE),
    "a host directory as a disk": (domain("<disk type='dir'><source dir='/'/></disk>"),
                                   "<disk type='dir'>", DEVICE_LINE),
    "a pool volume": (domain("<disk type='volume'><source pool='p' volume='v'/></disk>"),
                      "<disk type='volume'>", DEVICE_LINE),
    "a disk with no type": (domain("<disk device='disk'/>"), "<disk> must say its type",
                            DEVICE_LINE),
    "a SCSI passthrough": (domain("<disk type='file' device='lun'/>"), "device='lun'",
                           DEVICE_LINE),
    "the overlay read as raw": (domain(OVERLAY.replace("'qcow2'", "'raw'")),
                                "its <driver> must say type='qcow2'", DEVICE_LINE),
    "a backing file": (
        domain(OVERLAY.replace("</disk>", "<backingStore type='file'><source file='/etc/"
                               "shadow'/></backingStore></disk>")), "<backingStore>",
        DEVICE_LINE),
    "a host NIC (macvtap)": (domain("<interface type='direct'><source dev='eth0'/></interface>"),
                             "<interface type='direct'>", DEVICE_LINE),
    "a host NIC (passthrough)": (domain("<interface type='hostdev'/>"),
                                 "<interface type='hostdev'>", DEVICE_LINE),
    "user networking (the host's localhost)": (domain("<interface type='user'/>"),
                                               "<interface type='user'>", DEVICE_LINE),
    "a script run on the host": (
        domain("<interface type='bridge'><source bridge='br0'/><script path='/x'/></interface>"),
        "<script>", DEVICE_LINE),
    "a serial port to a host file": (
        domain("<serial type='file'><source path='/etc/passwd'/></serial>"), "'/etc/passwd'",
        DEVICE_LINE),
    "a serial port to a host device": (domain("<serial type='dev'><source path='/dev/ttyS0'/>"
                                              "</serial>"), "<serial type='dev'>", DEVICE_LINE),
    "a console on a host port": (domain("<console type='tcp'/>"), "<console type='tcp'>",
                                 DEVICE_LINE),
    "a pty with a host path": (domain("<serial type='pty'><source path='/dev/pts/0'/></serial>"),
                               "takes no <source>", DEVICE_LINE),
    "a console log to a host file": (
        domain("<serial type='pty'><log file='/etc/cron.d/x'/></serial>"), "<log>", DEVICE_LINE),
    "a channel on a socket path of the template's": (
        domain("<channel type='unix'><source mode='bind' path='/run/x.sock'/></channel>"),
        "<source path=...>", DEVICE_LINE),
    "a host input device": (domain("<input type='passthrough'/>"), "<input type='passthrough'>",
                            DEVICE_LINE),
    "graphics on a host socket": (
        domain("<graphics type='vnc'><listen type='socket' socket='/x'/></graphics>"),
        "<listen type='socket'>", DEVICE_LINE),
    "the host's GPU": (domain("<video><model type='virtio'><acceleration accel3d='yes'/></model>"
                              "</video>"), "<acceleration>", DEVICE_LINE),
    "entropy from a host device": (
        domain("<rng model='virtio'><backend model='random'>/dev/sda</backend></rng>"),
        "/dev/sda", DEVICE_LINE),
    "a socket to the host": (domain("<vsock model='virtio'/>"), "<vsock>", DEVICE_LINE),
    "a parallel port": (domain("<parallel type='file'/>"), "<parallel>", DEVICE_LINE),
    "a dump on the host": (domain("<watchdog model='i6300esb' action='dump'/>"),
                           "<watchdog action='dump'>", DEVICE_LINE),
    "the host's TPM": (domain("<tpm model='tpm-tis'><backend type='passthrough'/></tpm>"),
                       "<backend type='passthrough'>", DEVICE_LINE),
    "sVirt turned off": (domain(top="<seclabel type='none'/>"), "<seclabel>", TOP_LINE),
    "host files through fw_cfg": (
        domain(top="<sysinfo type='fwcfg'><entry name='opt/x' file='/etc/shadow'/></sysinfo>"),
        "<sysinfo>", TOP_LINE),
    "another kernel": (domain(os_extra="<kernel>/etc/shadow</kernel>"),
                       "'/etc/shadow' is not the image's kernel", OS_LINE),
    "a firmware file": (domain(os_extra="<loader readonly='no'>/etc/shadow</loader>"),
                        "<loader>", OS_LINE),
    "the host's SMBIOS": (domain(os_extra="<smbios mode='host'/>"), "<smbios>", OS_LINE),
    "an LXC container": (domain(kind="lxc"), "<domain type='lxc'>", 1),
    "a Xen PV guest": (domain().replace(">hvm<", ">linux<"), "<type>linux</type>", 5),
    "a crash dump on the host": (domain(top="<on_crash>coredump-destroy</on_crash>"),
                                 "coredump-destroy", TOP_LINE),
    "an unknown element": (domain(top="<perf><event name='x' enabled='yes'/></perf>"),
                           "<perf> is not allowed", TOP_LINE),
}  # fmt: skip


@pytest.mark.parametrize("xml", ALLOWED.values(), ids=ALLOWED.keys())
def test_what_a_vm_needs_is_allowed(xml: str) -> None:
    xmlallow.check(xml, FILES)


@pytest.mark.parametrize(("xml", "named", "line"), REFUSED.values(), ids=REFUSED.keys())
def test_what_reaches_the_host_is_refused_naming_the_element(
    xml: str, named: str, line: int
) -> None:
    with pytest.raises(TemplateError) as caught:
        xmlallow.check(xml, FILES)
    assert named in str(caught.value)
    assert caught.value.line == line, str(caught.value)


def test_a_doctype_is_refused_so_no_entity_is_ever_expanded() -> None:
    xml = "<?xml version='1.0'?>\n<!DOCTYPE d [<!ENTITY x SYSTEM 'file:///etc/shadow'>]>\n" + (
        domain().replace("<name>m</name>", "<name>&x;</name>")
    )
    with pytest.raises(TemplateError, match="DOCTYPE"):
        xmlallow.check(xml, FILES)


def test_the_built_in_template_passes_for_every_boot_and_console() -> None:
    """The built-in template as the libvirt driver fills it: a disk image with its seed,
    a kernel image, a console log (the driver's own fragments)."""
    disk_image = {**vmtemplate.SAMPLE, "disks": OVERLAY + SEED_CDROM}
    kernel_image = {
        **vmtemplate.SAMPLE,
        "boot": "<kernel>/boot/vmlinuz</kernel><initrd>/boot/initrd.gz</initrd>"
        "<cmdline>console=ttyS0</cmdline>",
        "console": "<serial type='file'><source path='/var/log/shoal/m.console'/>"
        "<target port='0'/></serial>",
    }
    for attrs in (vmtemplate.SAMPLE, disk_image, kernel_image):
        xml = xmlrender.render(vmtemplate.DEFAULT, attrs, vmtemplate.FRAGMENTS)
        xmlallow.check(xml, FILES)
    vmtemplate.check(vmtemplate.DEFAULT, [{"cpu": 2, "ram": 4}])


def test_an_entrys_value_cannot_name_a_host_file_through_an_attribute() -> None:
    """Values are escaped, so an entry cannot add elements; a template that puts one in
    an attribute is still checked with the entry's value in place."""
    template = vmtemplate.DEFAULT.replace(
        "{disks}", "<disk type='file' device='disk'><source file='{extra}'/></disk>"
    )
    with pytest.raises(TemplateError, match="/etc/shadow"):
        vmtemplate.check(template, [{"extra": "/etc/shadow"}])


def test_every_rule_of_the_table_hangs_under_an_allowed_parent() -> None:
    """A path whose parent is not allowed could never be reached: a typo in the table."""
    for path in xmlallow.ALLOWED:
        parent = path.rsplit("/", 1)[0]
        assert path == "domain" or parent in xmlallow.ALLOWED, path
    for path, rule in xmlallow.ALLOWED.items():
        assert rule.values.keys() <= rule.attrs and rule.required <= rule.attrs, path
