"""The libvirt driver: machines as domains on a set of libvirt hosts (docs/drivers.md).

libvirt-python is imported only inside this package (import-linter checks it), and
only when a provider uses the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.settings import LibvirtSettings


def open_provider(settings: LibvirtSettings) -> tuple[Any, Callable[[], None]]:
    """A libvirt provider's driver and how to close it (its connections). Connections
    open on first use, so a host that is down does not stop shoal from starting."""
    from shoal.drivers.libvirt.driver import LibvirtDriver

    driver = LibvirtDriver(settings)
    return driver, driver.close
