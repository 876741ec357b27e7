"""Providers: the named clouds and hosts of a deployment, each with its driver.

`build(settings)` opens one driver per provider of `settings.providers` (the
config file's, or the embedded `sim`); only the composition root calls it. Each
provider's driver kind is found by name in the registry (`registry.py`) and
opened by its own package's runtime module; a driver package is imported only
when a provider uses it, so a deployment of sim providers never imports a cloud SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from shoal.drivers import registry
from shoal.drivers.contract import Delegations, Driver, NoVirtHosts, VirtHosts
from shoal.settings import ProviderSettings, Settings


class Companion(Protocol):
    """Something a provider runs beside its driver while the process serves (the sim's
    emulated node agents): started with the process, stopped before it closes."""

    def start(self) -> None: ...
    def stop(self) -> None: ...


@dataclass
class Provider:
    """One provider of this process: its settings, its driver, for the sim its world
    (the admin API's handle), and what it runs beside the driver (`companions`)."""

    settings: ProviderSettings
    driver: Driver
    world: Any | None = None  # SimWorld (or its proxy) for a sim provider
    process: Any | None = None  # SimProcess when the world runs in a process of its own
    close: Callable[[], None] = field(default=lambda: None)
    companions: list[Companion] = field(default_factory=list)

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


def build(
    settings: Settings,
    delegations: Delegations | None = None,
    virt_hosts: VirtHosts | None = None,
) -> Providers:
    """Open the driver of every provider `settings` names; `delegations`: clusters'
    trusts, for OpenStack providers with Keystone authentication; `virt_hosts`: the
    clusters' virt hosts, for hosted providers (none when not given)."""
    opened: list[Provider] = []
    try:
        for ps in settings.providers:
            opened.append(_open(settings, ps, opened, delegations, virt_hosts))
    except BaseException:
        for p in opened:
            p.close()
        raise
    return Providers(opened, settings.default_provider)


@dataclass(frozen=True)
class Opening:
    """What a driver's opener gets: the process's settings, the provider to open (its
    `options` always its kind's settings), the providers opened before it (a hosted
    sim puts VMs in the world of one of them), clusters' trusts (`delegations`) and
    their virt hosts (`virt_hosts`, for drivers whose machines are VMs on them)."""

    settings: Settings
    provider: ProviderSettings
    before: tuple[Provider, ...] = ()
    delegations: Delegations | None = None
    virt_hosts: VirtHosts = field(default_factory=NoVirtHosts)


class DriverRuntime(Protocol):
    """A driver kind's runtime module (`DriverKind.runtime`)."""

    def open_provider(self, opening: Opening) -> Provider:
        """The provider's driver, opened; SettingsError naming the provider when its
        settings cannot work. Connections open on first use where they can."""
        ...


def runtime(kind: registry.DriverKind) -> DriverRuntime:
    """The runtime module of `kind` (imported now)."""
    module: DriverRuntime = registry.load(kind.runtime)
    return module


def databases(settings: Settings) -> list[str]:
    """The URLs of the databases the providers of `settings` keep (the sim's worlds),
    beside shoal's own: what must be private at rest."""
    out: list[str] = []
    for ps in settings.providers:
        module = registry.load(registry.kind(ps.driver).runtime)
        of = getattr(module, "databases", None)
        if of is not None:
            out.extend(of(settings, ps))
    return out


def _open(
    settings: Settings,
    ps: ProviderSettings,
    before: list[Provider],
    delegations: Delegations | None = None,
    virt_hosts: VirtHosts | None = None,
) -> Provider:
    kind = registry.kind(ps.driver, f"provider {ps.name!r}: driver")
    if not isinstance(ps.options, kind.settings):
        ps = replace(ps, options=ps.options if ps.options is not None else kind.settings())
    hosts = virt_hosts if virt_hosts is not None else NoVirtHosts()
    return runtime(kind).open_provider(Opening(settings, ps, tuple(before), delegations, hosts))
