"""The providers of a deployment, from the YAML file named by `SHOAL_CONFIG`.

    default_provider: east          # optional: the first provider otherwise
    providers:
      - name: east                  # what node groups choose it by
        driver: sim                 # a kind of drivers/registry.py (docs/configuration.md)
        settings: {time_scale: 50}  # the driver's own typed settings
        rate_per_s: 20              # optional limits on shoal's calls to it
        concurrency: 16
      - name: west
        driver: sim

Without a file, the providers are those the embedded driver (SHOAL_DRIVER) makes:
the sim's `sim` and `vms`, whose settings come from the `SHOAL_SIM_*` variables
(they are also the defaults of every sim provider a file names; what the file
says wins). A driver is found by name in `drivers/registry.py`; this module
names none. Every mistake is one SettingsError that names the file and the key.
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

from shoal.drivers import registry
from shoal.drivers.registry import ProviderSettings
from shoal.options import SettingsError, check_bounds, check_required, read_env

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


def driver_defaults(env: Mapping[str, str], overrides: dict[str, Any]) -> dict[str, Any]:
    """The defaults of each driver kind that has variables of its own (the sim's
    `SHOAL_SIM_*`), from those variables; a keyword override named for the kind
    (popped from `overrides`, e.g. `sim={"seed": 7}`) wins."""
    out: dict[str, Any] = {}
    for name in registry.names():
        given = overrides.pop(name, None) or {}
        try:
            kind = registry.kind(name)
        except SettingsError:
            continue  # not installed here: nothing of it can be configured either
        if kind.env_prefix is not None:
            out[name] = read_env(kind.settings, env, kind.env_prefix, given)
    return out


def providers(
    config: str | None, driver: str, defaults: Mapping[str, Any]
) -> tuple[list[ProviderSettings], str]:
    """The providers and the default provider's name, from the file `config` or, with
    no file, the embedded providers of `driver` (SHOAL_DRIVER); `defaults`: each
    driver kind's defaults from its variables."""
    if not config:
        embedded = _embedded(driver, defaults)
        return embedded, embedded[0].name
    path = Path(config)
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
        p = _provider(defaults, entry, f"{where}: providers[{i}]")
        if any(q.name == p.name for q in out):
            raise SettingsError(f"{where}: providers[{i}].name: {p.name!r} is named twice")
        out.append(p)
    default = data.get("default_provider", out[0].name)
    if default not in {p.name for p in out}:
        names = ", ".join(p.name for p in out)
        raise SettingsError(f"{where}: default_provider: {default!r} is none of ({names})")
    return out, str(default)


def _embedded(driver: str, defaults: Mapping[str, Any]) -> list[ProviderSettings]:
    """The providers of a deployment without a file: those the driver SHOAL_DRIVER
    names makes of its defaults (the sim's: `sim`, and beside it `vms`)."""
    kind = registry.kind(driver, "SHOAL_DRIVER")
    if kind.embedded is None:
        raise SettingsError(
            f"SHOAL_DRIVER={driver!r}: the {driver} driver needs its settings; "
            "name the provider in a config file (SHOAL_CONFIG, see docs/configuration.md)"
        )
    return kind.embedded(defaults.get(driver) or kind.settings())


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


def _provider(defaults: Mapping[str, Any], entry: Any, where: str) -> ProviderSettings:
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
    if not isinstance(driver, str):
        raise SettingsError(
            f"{where}.driver={driver!r} is not a known driver "
            f"(drivers: {', '.join(registry.names())})"
        )
    kind = registry.kind(driver, f"{where}.driver")
    # A kind with variables of its own (SHOAL_SIM_*) starts from them; others from their class.
    base = defaults.get(driver) or kind.settings()
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
    optional one, a settings dataclass (a mapping), a mapping of strings to strings,
    or a tuple of them (a list; for strings, one string is a list of one)."""
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
    if typing.get_origin(kind) in (dict, Mapping) and args == (str, str):
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
        ):
            raise SettingsError(f"{where}: {value!r} is not a mapping of names to strings")
        return dict(value)
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
