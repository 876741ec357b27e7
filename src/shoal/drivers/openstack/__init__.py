"""The OpenStack driver: Nova servers in one cloud project, through openstacksdk
(docs/drivers.md, "The openstack driver")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.settings import OpenStackSettings


def open_provider(settings: OpenStackSettings, pool_size: int) -> tuple[Any, Callable[[], None]]:
    """An OpenStack provider's driver and how to close it. Reads the clouds.yaml entry
    now (SettingsError when it cannot be used); does not call the cloud, so a cloud
    that is down does not keep shoal from starting (the provider check says so)."""
    from shoal.drivers.openstack import identity
    from shoal.drivers.openstack.driver import OpenStackDriver

    region = identity.load_region(settings)
    ident = identity.ConfiguredIdentity(lambda: identity.connect(region, pool_size))
    return OpenStackDriver(settings, ident), ident.close
