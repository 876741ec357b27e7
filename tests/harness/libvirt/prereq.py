"""What a LibvirtHost needs on the machine, and what is missing (a reason per piece)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")

# tool -> Debian package that has it
REQUIRED_TOOLS = {
    "qemu-system-x86_64": "qemu-system-x86",
    "libvirtd": "libvirt-daemon",
    "virsh": "libvirt-clients",
    "dnsmasq": "dnsmasq-base",
    "iptables": "iptables",
    "busybox": "busybox-static",
    "ip": "iproute2",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "setpriv": "util-linux",
    "apt-get": "apt",
    "dpkg-deb": "dpkg",
}
QEMU_DRIVER_GLOB = "/usr/lib/*/libvirt/connection-driver/libvirt_driver_qemu.so"


def _which(tool: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SBIN)
    return shutil.which(tool, path=path)


def missing_prerequisites() -> list[str]:
    """Why this machine cannot run a LibvirtHost: one line per missing piece (empty: it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append(f"not root (euid {os.geteuid()}): libvirtd needs root for namespaces")
    for tool, package in REQUIRED_TOOLS.items():
        if _which(tool) is None:
            missing.append(f"{tool} not found (Debian package {package})")
    if _which("libvirtd") and not list(Path("/").glob(QEMU_DRIVER_GLOB.lstrip("/"))):
        missing.append(
            "libvirt's QEMU driver not found (Debian package libvirt-daemon-driver-qemu)"
        )
    return missing
