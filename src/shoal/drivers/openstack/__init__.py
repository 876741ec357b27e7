"""The OpenStack driver: Nova servers in one cloud project, through openstacksdk
(docs/drivers.md, "The openstack driver")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.drivers.contract import Delegations
from shoal.settings import OpenStackSettings


def open_provider(
    settings: OpenStackSettings,
    pool_size: int,
    trustee: OpenStackSettings | None = None,
    delegations: Delegations | None = None,
) -> tuple[Any, Callable[[], None]]:
    """An OpenStack provider's driver and how to close it. Reads the clouds.yaml entries
    now (SettingsError when one cannot be used); does not call the cloud, so a cloud
    that is down does not keep shoal from starting (the provider check says so).
    `trustee`: shoal's service user, which acts with clusters' trusts (`delegations`)."""
    from shoal.drivers.openstack import identity
    from shoal.drivers.openstack.driver import OpenStackDriver

    region = identity.load_region(settings)
    ident: identity.Identity = identity.ConfiguredIdentity(
        lambda: identity.connect(region, pool_size)
    )
    if trustee is not None and delegations is not None:
        ident = identity.DelegatedIdentity(
            ident, identity.load_region(trustee), delegations, pool_size
        )
    return OpenStackDriver(settings, ident), ident.close
