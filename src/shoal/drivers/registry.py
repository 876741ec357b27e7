"""Providers: the named clouds and hosts of a deployment, each with its driver.

`build(settings)` opens one driver per provider of `settings.providers` (the
config file's, or the embedded `sim`); only the composition root calls it. A
driver package is imported only when a provider uses it, so a deployment of
sim providers never imports a cloud SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.drivers.contract import Delegations, Driver
from shoal.settings import OpenStackSettings, ProviderSettings, Settings, SettingsError


@dataclass
class Provider:
    """One provider of this process: its settings, its driver, and for the sim its
    world (the admin API's handle)."""

    settings: ProviderSettings
    driver: Driver
    world: Any | None = None  # SimWorld (or its proxy) for a sim provider
    process: Any | None = None  # SimProcess when the world runs in a process of its own
    close: Callable[[], None] = field(default=lambda: None)

    @property
    def name(self) -> str:
        return self.settings.name


class Providers(Mapping[str, Provider]):
    """The providers of one process, by name, and which one is the default."""

    def __init__(self, providers: list[Provider], default: str) -> None:
        self._by_name = {p.name: p for p in providers}
        if default not in self._by_name:
            raise KeyError(default)
        self.default = default

    @classmethod
    def of(cls, drivers: Mapping[str, Driver], default: str | None = None) -> Providers:
        """Providers around drivers built elsewhere (tests, tools): default limits."""
        items = [Provider(ProviderSettings(name=n, driver=d.name), d) for n, d in drivers.items()]
        return cls(items, default or next(iter(drivers)))

    def __getitem__(self, name: str) -> Provider:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def resolve(self, name: str | None) -> str:
        """The provider a node group uses: its own, else the default."""
        return name or self.default

    def sim_world(self, name: str | None = None) -> Any | None:
        """The world of sim provider `name` (default: the first sim provider)."""
        for p in self._by_name.values():
            if p.world is not None and name in (None, p.name):
                return p.world
        return None

    def close(self) -> None:
        for p in self._by_name.values():
            p.close()


def build(settings: Settings, delegations: Delegations | None = None) -> Providers:
    """Open the driver of every provider `settings` names; `delegations`: clusters'
    trusts, for OpenStack providers with Keystone authentication."""
    opened: list[Provider] = []
    try:
        for ps in settings.providers:
            opened.append(_open(settings, ps, opened, delegations))
    except BaseException:
        for p in opened:
            p.close()
        raise
    return Providers(opened, settings.default_provider)


def _open(
    settings: Settings,
    ps: ProviderSettings,
    before: list[Provider],
    delegations: Delegations | None = None,
) -> Provider:
    if ps.driver == "sim" and ps.options.hosted:
        # VMs on virt hosts: in the world the hosts are servers of (the first sim's).
        host = next((p for p in before if p.world is not None), None)
        if host is None:
            raise SettingsError(
                f"provider {ps.name!r}: a hosted sim provider puts VMs on the servers of a sim "
                "provider named before it; name one first"
            )
        from shoal.drivers.sim.hosted import HostedSimDriver

        world = host.world
        assert world is not None
        return Provider(ps, HostedSimDriver(world))  # the world stays its host provider's
    if ps.driver == "sim":
        from shoal.drivers.sim import open_provider

        driver, world, process, close = open_provider(settings.sim_db_url(ps), ps.options)
        return Provider(ps, driver, world, process, close)
    if ps.driver == "libvirt":
        from shoal.drivers.libvirt import open_provider as open_libvirt

        try:
            driver, close = open_libvirt(ps.options)
        except ValueError as exc:  # a domain template that cannot work
            raise SettingsError(f"provider {ps.name!r}: {exc}") from exc
        return Provider(ps, driver, close=close)
    if ps.driver == "openstack":
        from shoal.drivers.openstack import open_provider as open_openstack

        pool = ps.concurrency or settings.conductor_settings.driver_concurrency
        ks = settings.keystone
        trusts = settings.auth == "keystone" and ks.trusts
        trustee = OpenStackSettings(cloud=ks.cloud, clouds_yaml=ks.clouds_yaml,
                                    region_name=ks.region_name) if trusts else None  # fmt: skip
        try:
            driver, close = open_openstack(ps.options, pool, trustee, delegations)
        except SettingsError as exc:
            raise SettingsError(f"provider {ps.name!r}: {exc}") from exc
        return Provider(ps, driver, close=close)
    if ps.driver == "local":
        from shoal.drivers.local import open_provider as open_local

        driver, close = open_local(ps.options)
        return Provider(ps, driver, close=close)
    raise ValueError(f"provider {ps.name!r}: driver {ps.driver!r} is not available")
