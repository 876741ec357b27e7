"""The libvirt driver: machines as domains on a set of libvirt hosts (docs/drivers.md).

libvirt-python is imported only inside this package (import-linter checks it), and
only when a provider uses the driver.
"""

from __future__ import annotations

from shoal.drivers.libvirt import settings
from shoal.drivers.registry import DriverKind

DRIVER = DriverKind(
    name="libvirt",
    settings=settings.LibvirtSettings,
    runtime="shoal.drivers.libvirt.opener",
    contract="shoal.drivers.libvirt.testing:HARNESSES",
)
