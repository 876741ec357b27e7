"""The driver kinds this version of shoal knows, by name: one line each.

A driver is one package, `shoal.drivers.<name>`, whose `DRIVER` (a `DriverKind`)
names its typed settings, its opener and its contract-suite harnesses. `KINDS`
maps a kind's name to that object's dotted path; a package is imported only when
something asks for its kind (a provider of the config file, `shoal serve`), so a
deployment of sim providers never imports a cloud SDK. Adding a driver: a new
package and one line in `KINDS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.options import SettingsError, opt

KINDS: Mapping[str, str] = {
    "sim": "shoal.drivers.sim:DRIVER",
    "openstack": "shoal.drivers.openstack:DRIVER",
    "libvirt": "shoal.drivers.libvirt:DRIVER",
    "local": "shoal.drivers.local:DRIVER",
    "heat": "shoal.drivers.heat:DRIVER",
}


@dataclass(frozen=True)
class ProviderSettings:
    """One provider: a named cloud or set of hosts, its driver and that driver's settings."""

    name: str = opt("sim", "the name node groups choose it by")
    driver: str = opt("sim", "the driver that talks to it: " + ", ".join(KINDS))
    options: Any = opt(
        None,
        "the driver's own typed settings (its package's settings class; None: its defaults)",
    )
    rate_per_s: float | None = opt(
        None, "driver calls per second to this provider (default: the conductor's)", lo=0
    )
    concurrency: int | None = opt(
        None, "parallel driver calls to this provider per process (default: all)", lo=1, hi=1024
    )
    concurrency_per_target: int | None = opt(
        None, "parallel calls per target (one libvirt host) of this provider", lo=1, hi=1024
    )
    agents: bool = opt(
        False,
        "its nodes run shoal-agent (their images carry it): a node whose agent never reports "
        "within the health policy's startup timeout is unhealthy",
    )


@dataclass(frozen=True)
class DriverKind:
    """What shoal needs to know of a driver before it opens one.

    `settings`: the class of a provider's `settings:` (a frozen dataclass of `opt`
    fields, checked as a whole by its `problems()` when it has one). `runtime`: the
    module (imported only to open a provider) whose `open_provider(opening)` returns a
    `providers.Provider`, and whose optional `databases(settings, provider)` names
    the databases it keeps (made private at start). `env_prefix`: the variables
    (`SHOAL_SIM_`) that give the defaults of every provider of this kind.
    `embedded`: the providers of a deployment without a config file whose
    SHOAL_DRIVER is this kind (None: this kind needs a file). `contract`: the dotted
    path of its contract-suite harnesses (`testing.HARNESSES`), if it ships any."""

    name: str
    settings: type[Any]
    runtime: str
    env_prefix: str | None = None
    embedded: Callable[[Any], list[ProviderSettings]] | None = None
    contract: str | None = None


_loaded: dict[str, DriverKind] = {}


def names() -> tuple[str, ...]:
    """Every kind this version knows, in the registry's order."""
    return tuple(KINDS)


def kind(name: str, where: str = "driver") -> DriverKind:
    """The kind named `name` (its package imported now), or a SettingsError naming
    `where`: not a known driver, or one whose package this installation lacks."""
    if name in _loaded:
        return _loaded[name]
    if name not in KINDS:
        raise SettingsError(f"{where}={name!r} is not a known driver (drivers: {', '.join(KINDS)})")
    try:
        got = load(KINDS[name])
    except ImportError as exc:
        available = ", ".join(n for n in KINDS if n in _loaded or _importable(n))
        raise SettingsError(
            f"{where}={name!r}: that driver is not available in this version of shoal "
            f"(available: {available})"
        ) from exc
    if not isinstance(got, DriverKind) or got.name != name:
        raise TypeError(f"{KINDS[name]} is not the DriverKind named {name!r}")
    _loaded[name] = got
    return got


def load(path: str) -> Any:
    """The object a `module:attribute` path names (the module imported now)."""
    module, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _importable(name: str) -> bool:
    try:
        load(KINDS[name])
    except ImportError:
        return False
    return True
