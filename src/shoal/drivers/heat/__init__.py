"""The heat driver: one Heat stack per node group on an OpenStack cloud, from a built-in
Magnum-convention template or the operator's own (docs/drivers.md, "The heat driver")."""

from __future__ import annotations

from shoal.drivers.heat import settings
from shoal.drivers.registry import DriverKind

DRIVER = DriverKind(
    name="heat",
    settings=settings.HeatSettings,
    runtime="shoal.drivers.heat.opener",
    contract="shoal.drivers.heat.testing:HARNESSES",
)
