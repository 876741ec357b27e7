"""Opening a libvirt provider: its driver. Connections open on first use, so a host
that is down does not stop shoal from starting."""

from __future__ import annotations

from shoal.drivers.providers import Opening, Provider
from shoal.settings import SettingsError


def open_provider(opening: Opening) -> Provider:
    """The libvirt provider's driver (see `DriverRuntime.open_provider`)."""
    from shoal.drivers.libvirt.driver import LibvirtDriver
    from shoal.drivers.libvirt.hosted import HostedLibvirtDriver

    ps = opening.provider
    try:
        if ps.options.uri_template:  # the hosts are the virt hosts of each cluster
            driver: LibvirtDriver = HostedLibvirtDriver(ps.options, opening.virt_hosts)
        else:
            driver = LibvirtDriver(ps.options)
    except ValueError as exc:  # a domain template that cannot work
        raise SettingsError(f"provider {ps.name!r}: {exc}") from exc
    return Provider(ps, driver, close=driver.close)
