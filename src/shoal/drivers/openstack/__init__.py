"""The OpenStack driver: Nova servers in one cloud project, through openstacksdk
(docs/drivers.md, "The openstack driver")."""

from __future__ import annotations

from shoal.drivers.openstack import settings
from shoal.drivers.registry import DriverKind

DRIVER = DriverKind(
    name="openstack",
    settings=settings.OpenStackSettings,
    runtime="shoal.drivers.openstack.opener",
    contract="shoal.drivers.openstack.testing:HARNESSES",
)
