"""Magnum microversions: parse `OpenStack-API-Version`, answer 406 out of range."""

from __future__ import annotations

import re

MIN = (1, 1)
MAX = (1, 14)
DEFAULT = MIN
HEADER = "OpenStack-API-Version"
SERVICES = ("container-infra", "container-infrastructure-management", "container-infrastructure")
_VERSION = re.compile(r"^([0-9]+)\.([0-9]+)$")
# A part with more digits than this is out of range whatever it says (and int()
# of 4,300 digits or more raises), so it is refused as unsupported unparsed.
_PART_DIGITS_MAX = 6


class BadVersion(ValueError):
    """The header names our service with an unparsable version (400)."""


class UnsupportedVersion(ValueError):
    """A well-formed version outside [MIN, MAX] (406)."""


def fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def parse(header: str | None) -> tuple[int, int]:
    """The effective version for a request; no header (or none for us) = 1.1."""
    if not header:
        return DEFAULT
    for part in header.split(","):
        words = part.strip().split()
        if len(words) != 2 or words[0].lower() not in SERVICES:
            continue
        raw = words[1].lower()
        if raw == "latest":
            return MAX
        m = _VERSION.match(raw)
        if not m:
            shown = raw if len(raw) <= 32 else raw[:32] + "..."
            raise BadVersion(f"Invalid API version string {shown!r}: use X.Y or latest")
        if max(len(m.group(1)), len(m.group(2))) > _PART_DIGITS_MAX:
            raise UnsupportedVersion(raw[:16] + f"... ({len(raw)} characters)")
        version = (int(m.group(1)), int(m.group(2)))
        if not MIN <= version <= MAX:
            raise UnsupportedVersion(fmt(version))
        return version
    return DEFAULT
