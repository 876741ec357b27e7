"""The machinery of typed settings: a field with default, bounds and help text, the
error that names a setting, the checks, and reading `SHOAL_*` variables.

A leaf: it imports nothing of shoal, so the settings tree (`settings.py`), the
config file (`settings_file.py`) and each driver's own settings
(`drivers/<name>/settings.py`) build on it without importing each other.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """A setting has a value outside its bounds; the message names it."""


def opt(
    default: Any,
    help: str,
    lo: float | None = None,
    hi: float | None = None,
    *,
    required: bool = False,
    pattern: str | None = None,
) -> Any:
    """A setting's field: default, help text, numeric bounds; `required` (a file must
    give it: no default fits every deployment) and `pattern` (a regular expression a
    string value must match)."""
    meta = {"help": help, "lo": lo, "hi": hi, "required": required, "pattern": pattern}
    return field(default=default, metadata=meta)


def check_bounds(obj: Any, key: Callable[[str], str]) -> None:
    """SettingsError naming (as `key(field)` says) the first field of `obj` outside its
    bounds: a number outside [lo, hi], a string that does not match its pattern."""
    for f in dataclasses.fields(obj):
        lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
        pattern = f.metadata.get("pattern")
        v = getattr(obj, f.name)
        numeric = isinstance(v, int | float) and not isinstance(v, bool)
        if numeric and ((lo is not None and v < lo) or (hi is not None and v > hi)):
            raise SettingsError(
                f"{key(f.name)}={v} is out of bounds [{lo}, {hi}]: {f.metadata.get('help')}"
            )
        if pattern and isinstance(v, str) and not re.match(pattern, v):
            raise SettingsError(
                f"{key(f.name)}={v!r} does not match {pattern}: {f.metadata.get('help')}"
            )


def check_required(obj: Any, key: Callable[[str], str]) -> None:
    """SettingsError naming the first required field of `obj` that was not given."""
    for f in dataclasses.fields(obj):
        if f.metadata.get("required") and getattr(obj, f.name) is None:
            raise SettingsError(f"{key(f.name)}: required: {f.metadata.get('help')}")


def read_env(
    cls: type[Any], env: Mapping[str, str], prefix: str, overrides: Mapping[str, Any], **fixed: Any
) -> Any:
    """`cls` from its defaults, then `<prefix><FIELD>` variables, then `overrides`
    (fields in `fixed` are given as they are), its bounds checked."""
    values: dict[str, Any] = dict(fixed)
    for f in dataclasses.fields(cls):
        if f.name in fixed:
            continue
        key = prefix + f.name.upper()
        if f.name in overrides:
            values[f.name] = overrides[f.name]
        elif key in env:
            values[f.name] = _parse(f, env[key], key)
    obj = cls(**values)
    check_bounds(obj, lambda name: prefix + name.upper())
    return obj


def _parse(f: dataclasses.Field[Any], raw: str, key: str) -> Any:
    kind = str(f.type)
    try:
        if kind == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path":
            return Path(raw)
        return raw or None if "None" in kind else raw
    except ValueError as exc:
        help_text = f.metadata.get("help")
        raise SettingsError(f"{key}={raw!r} is not a valid {kind}: {help_text}") from exc
