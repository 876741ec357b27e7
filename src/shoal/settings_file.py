"""The providers of a deployment, from the YAML file named by `SHOAL_CONFIG`.

    default_provider: east          # optional: the first provider otherwise
    providers:
      - name: east                  # what node groups choose it by
        driver: sim                 # sim or openstack (see docs/configuration.md)
        settings: {time_scale: 50}  # the driver's own typed settings
        rate_per_s: 20              # optional limits on shoal's calls to it
        concurrency: 16
      - name: west
        driver: sim

Without a file there is one provider, `sim`, whose settings come from the
`SHOAL_SIM_*` variables (they are also the defaults of every sim provider a
file names; what the file says wins). Every mistake is one SettingsError that
names the file and the key.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from shoal.settings import (
    DEFAULT_PROVIDER,
    DRIVERS,
    VMS_PROVIDER,
    ProviderSettings,
    Settings,
    SettingsError,
    check_bounds,
    check_required,
    driver_settings,
)

NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
TOP_KEYS = ("default_provider", "providers")
PROVIDER_KEYS = (
    "name",
    "driver",
    "settings",
    "rate_per_s",
    "concurrency",
    "concurrency_per_target",
)


def providers(settings: Settings) -> tuple[list[ProviderSettings], str]:
    """The providers and the default provider's name, from `settings.config` or, with
    no file, the embedded default."""
    if not settings.config:
        embedded = _embedded(settings)
        vms = ProviderSettings(
            name=VMS_PROVIDER, driver="sim", options=dataclasses.replace(settings.sim, hosted=True)
        )
        return [embedded, vms], DEFAULT_PROVIDER
    path = Path(settings.config)
    data = _read(path)
    where = str(path)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise SettingsError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(TOP_KEYS)})")
    raw = data.get("providers")
    if not isinstance(raw, list) or not raw:
        raise SettingsError(f"{where}: providers: a non-empty list of providers is required")
    out: list[ProviderSettings] = []
    for i, entry in enumerate(raw):
        p = _provider(settings, entry, f"{where}: providers[{i}]")
        if any(q.name == p.name for q in out):
            raise SettingsError(f"{where}: providers[{i}].name: {p.name!r} is named twice")
        out.append(p)
    default = data.get("default_provider", out[0].name)
    if default not in {p.name for p in out}:
        names = ", ".join(p.name for p in out)
        raise SettingsError(f"{where}: default_provider: {default!r} is none of ({names})")
    return out, str(default)


def _embedded(settings: Settings) -> ProviderSettings:
    """The provider of a deployment without a file: the sim (beside it, `vms`: VMs on
    the virt hosts of each cluster, in the same world)."""
    _check_driver(settings.driver, "SHOAL_DRIVER")
    if settings.driver != "sim":
        raise SettingsError(
            f"SHOAL_DRIVER={settings.driver!r}: the {settings.driver} driver needs its settings; "
            "name the provider in a config file (SHOAL_CONFIG, see docs/configuration.md)"
        )
    return ProviderSettings(name=DEFAULT_PROVIDER, driver="sim", options=settings.sim)


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"SHOAL_CONFIG={path}: cannot read it ({exc.strerror})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise SettingsError(f"{path}: {problem}{at}") from exc
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: the file must be a mapping with a `providers` list")
    return data


def _check_driver(driver: Any, where: str) -> None:
    if driver not in DRIVERS:
        raise SettingsError(
            f"{where}={driver!r} is not a known driver (drivers: {', '.join(DRIVERS)})"
        )
    available = driver_settings()
    if driver not in available:
        raise SettingsError(
            f"{where}={driver!r}: that driver is not available in this version of shoal "
            f"(available: {', '.join(available)})"
        )


def _provider(settings: Settings, entry: Any, where: str) -> ProviderSettings:
    if not isinstance(entry, dict):
        raise SettingsError(f"{where}: a provider is a mapping with name, driver and settings")
    unknown = sorted(set(entry) - set(PROVIDER_KEYS))
    if unknown:
        raise SettingsError(
            f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(PROVIDER_KEYS)})"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise SettingsError(
            f"{where}.name: {name!r} is not a provider name (lowercase letters, digits and "
            "'-', starting with a letter, at most 63)"
        )
    driver = entry.get("driver")
    _check_driver(driver, f"{where}.driver")
    # The sim's defaults are the SHOAL_SIM_* variables; other drivers start from theirs.
    base = settings.sim if driver == "sim" else driver_settings()[str(driver)]()
    options = _typed(base, entry.get("settings") or {}, f"{where}.settings")
    check_required(options, lambda name: f"{where}.settings.{name}")
    limits = {k: entry[k] for k in PROVIDER_KEYS[3:] if entry.get(k) is not None}
    # A driver may say how many parallel calls suit its clouds when the file does not.
    default_concurrency = getattr(options, "PROVIDER_CONCURRENCY", None)
    if default_concurrency is not None:
        limits.setdefault("concurrency", default_concurrency)
    p: ProviderSettings = _typed(
        ProviderSettings(name=name, driver=str(driver), options=options), limits, where
    )
    return p


def _typed(base: Any, values: Any, where: str) -> Any:
    """`base` (a settings dataclass) with `values` from the file, each checked; a settings
    class with a `problems()` method is checked as a whole too."""
    if not isinstance(values, Mapping):
        raise SettingsError(f"{where}: a mapping of settings is expected")
    fields = {f.name: f for f in dataclasses.fields(base)}
    hints = typing.get_type_hints(type(base))
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise SettingsError(f"{where}.{key}: not a setting of this driver (settings: {known})")
        changes[key] = _value(hints[key], value, f"{where}.{key}")
    out = dataclasses.replace(base, **changes)
    check_bounds(out, lambda name: f"{where}.{name}")
    problems = getattr(out, "problems", None)
    if callable(problems):
        for problem in problems():
            raise SettingsError(f"{where}.{problem}")
    return out


def _value(kind: Any, value: Any, where: str) -> Any:
    """A YAML value as the field's type: int, float (ints accepted), bool, str, an
    optional one, a settings dataclass (a mapping) or a tuple of them (a list; for
    strings, one string is a list of one)."""
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
        if value is None:
            return None
        (kind,) = (a for a in args if a is not type(None))
        args = typing.get_args(kind)
    if typing.get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis:
        if args[0] is str and isinstance(value, str):
            value = [value]  # one string is a list of one
        if not isinstance(value, list):
            raise SettingsError(f"{where}: a list is expected")
        if args[0] is str and not all(isinstance(v, str) and v for v in value):
            raise SettingsError(f"{where}: {value!r} is not a list of strings")
        return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        if not isinstance(value, Mapping):
            raise SettingsError(f"{where}: a mapping is expected")
        fields = {f.name for f in dataclasses.fields(kind)}
        unknown = sorted(set(value) - fields)
        if unknown:
            known = ", ".join(sorted(fields))
            raise SettingsError(f"{where}.{unknown[0]}: not a setting here (settings: {known})")
        return _typed(kind(), value, where)
    ok = {
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        bool: isinstance(value, bool),
        str: isinstance(value, str),
    }.get(kind)
    if ok is None:
        raise SettingsError(f"{where}: cannot be set in the file")
    if not ok:
        raise SettingsError(f"{where}: {value!r} is not a valid {kind.__name__}")
    return float(value) if kind is float else value
