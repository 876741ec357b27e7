"""A real libvirtd + QEMU test host in its own namespaces, and the tiny guest it boots.

See docs/testing-libvirt.md. Tests get a running host from the ``libvirt_host`` fixture
(tests/support/libvirt_host.py); ``python -m tests.harness.libvirt`` runs one by hand.
"""

from tests.harness.libvirt.domain import SHOAL_XMLNS, static_ip_arg, tiny_domain_xml
from tests.harness.libvirt.guest import GuestBuildError, GuestImage, ensure_guest
from tests.harness.libvirt.host import (
    TEST_DRIVER_URI,
    HostError,
    HostUnavailable,
    LibvirtHost,
    Ready,
    no_daemon_uri,
)
from tests.harness.libvirt.prereq import missing_prerequisites
from tests.harness.libvirt.procs import NsProcess

__all__ = [
    "SHOAL_XMLNS",
    "TEST_DRIVER_URI",
    "GuestBuildError",
    "GuestImage",
    "HostError",
    "HostUnavailable",
    "LibvirtHost",
    "NsProcess",
    "Ready",
    "ensure_guest",
    "missing_prerequisites",
    "static_ip_arg",
    "no_daemon_uri",
    "tiny_domain_xml",
]
