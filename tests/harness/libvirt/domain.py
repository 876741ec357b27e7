"""libvirt XML for tests: the tiny guest's domain, and the host's isolated network.

TCG only (``<domain type='qemu'>``): this machine's /dev/kvm is a software nested hypervisor
under which normal kernels stall in early boot, and TCG also covers a CI without KVM.
96 MiB is the smallest memory the cloud kernel boots in (64 MiB panics); a 16 MiB translation
cache takes the qemu process from ~200 to ~164 MiB RSS; ``no_timer_check`` avoids the
"IO-APIC + timer doesn't work!" panic of a guest booted on a loaded host.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

SHOAL_XMLNS = "https://shoal.dev/xmlns/1"
DEFAULT_MEMORY_MIB = 96
TB_CACHE_MIB = 16


def static_ip_arg(address: str, gateway: str, prefix: int, hostname: str) -> str:
    """The kernel command line's ``ip=`` for a static address (the guest's /init parses it)."""
    mask = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF
    netmask = ".".join(str((mask >> shift) & 0xFF) for shift in (24, 16, 8, 0))
    return f"ip={address}::{gateway}:{netmask}:{hostname}:eth0:off"


def tiny_domain_xml(
    name: str,
    *,
    kernel: Path,
    initrd: Path,
    network: str,
    console: Path,
    cmdline: str,
    memory_mib: int = DEFAULT_MEMORY_MIB,
    mac: str | None = None,
    metadata: str = "",
    node: str | None = None,
) -> str:
    """A tiny guest on ``network``: serial console to the file ``console``, no disk, no balloon.

    ``cmdline`` is appended to ``console=ttyS0 quiet no_timer_check node=<node>``: give it an
    ``ip=`` (see :func:`static_ip_arg`, or ``ip=dhcp``) and optionally ``shoal_url=<seed URL>``.
    ``node`` defaults to ``name``; ``""`` leaves ``node=`` out (a seed's local-hostname names it).
    ``metadata`` is raw XML placed inside ``<metadata>`` (elements need their own namespace).
    """
    node = name if node is None else node
    base = "console=ttyS0 quiet no_timer_check" + (f" node={node}" if node else "")
    mac_xml = f"<mac address={quoteattr(mac)}/>" if mac else ""
    return f"""<domain type='qemu'>
  <name>{escape(name)}</name>
  <metadata>{metadata}</metadata>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{escape(str(kernel))}</kernel>
    <initrd>{escape(str(initrd))}</initrd>
    <cmdline>{escape(f"{base} {cmdline}".strip())}</cmdline>
  </os>
  <features>
    <acpi/>
    <tcg><tb-cache unit='MiB'>{TB_CACHE_MIB}</tb-cache></tcg>
  </features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <interface type='network'>
      <source network={quoteattr(network)}/>{mac_xml}
      <model type='virtio'/>
    </interface>
    <serial type='file'>
      <source path={quoteattr(str(console))}/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def isolated_network_xml(name: str, bridge: str, subnet: ipaddress.IPv4Network) -> str:
    """A network with no forwarding: bridge + dnsmasq DHCP on .100-.250, gateway .1."""
    net = subnet.network_address
    return f"""<network xmlns:dnsmasq='http://libvirt.org/schemas/network/dnsmasq/1.0'>
  <name>{escape(name)}</name>
  <bridge name={quoteattr(bridge)} stp='off' delay='0'/>
  <ip address='{net + 1}' netmask='{subnet.netmask}'>
    <dhcp><range start='{net + 100}' end='{net + 250}'/></dhcp>
  </ip>
  <dnsmasq:options>
    <!-- without these, parallel guests' DHCP fails: no ICMP probe before an offer;
         2-message leases -->
    <dnsmasq:option value='no-ping'/>
    <dnsmasq:option value='dhcp-rapid-commit'/>
  </dnsmasq:options>
</network>
"""
