"""The local driver: machines are namespace machines on the shoal host (driver.py,
docs/drivers.md). Root only; its host operations are in hostops.py."""

from __future__ import annotations

from shoal.drivers.local import settings
from shoal.drivers.registry import DriverKind

DRIVER = DriverKind(
    name="local",
    settings=settings.LocalSettings,
    runtime="shoal.drivers.local.opener",
    contract="shoal.drivers.local.testing:HARNESSES",
)
