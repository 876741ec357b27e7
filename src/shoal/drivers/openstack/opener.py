"""Opening an OpenStack provider: its driver, acting with shoal's clouds.yaml entry or,
under Keystone authentication with trusts, as shoal's service user with clusters'
trusts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.drivers.contract import Delegations
from shoal.drivers.openstack.settings import OpenStackSettings
from shoal.drivers.providers import Opening, Provider
from shoal.settings import SettingsError


def open_provider(opening: Opening) -> Provider:
    """The OpenStack provider's driver (see `DriverRuntime.open_provider`)."""
    ps, settings = opening.provider, opening.settings
    pool = ps.concurrency or settings.conductor_settings.driver_concurrency
    ks = settings.keystone
    trusts = settings.auth == "keystone" and ks.trusts
    trustee = OpenStackSettings(cloud=ks.cloud, clouds_yaml=ks.clouds_yaml,
                                region_name=ks.region_name) if trusts else None  # fmt: skip
    try:
        driver, close = connect(ps.options, pool, trustee, opening.delegations)
    except SettingsError as exc:
        raise SettingsError(f"provider {ps.name!r}: {exc}") from exc
    return Provider(ps, driver, close=close)


def connect(
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
