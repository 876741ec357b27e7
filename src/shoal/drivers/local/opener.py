"""Opening a local provider: its driver. Closing it leaves its machines running: a
restarted shoal finds them in the state dir."""

from __future__ import annotations

from shoal.drivers.providers import Opening, Provider


def open_provider(opening: Opening) -> Provider:
    """The local provider's driver (see `DriverRuntime.open_provider`)."""
    from shoal.drivers.local.driver import LocalDriver

    return Provider(opening.provider, LocalDriver(opening.provider.options))
