"""The simulated cloud: the reference driver and the embedded default (docs/drivers.md)."""

from __future__ import annotations

from shoal.drivers.registry import DriverKind
from shoal.drivers.sim import settings

DRIVER = DriverKind(
    name="sim",
    settings=settings.SimSettings,
    runtime="shoal.drivers.sim.opener",
    env_prefix="SHOAL_SIM_",
    embedded=settings.embedded,
    contract="shoal.drivers.sim.testing:HARNESSES",
)
