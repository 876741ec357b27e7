"""API tokens shoal issues itself (authentication mode `local`): their form, what is kept
of them, and how long they live. Pure: the database keeps only `digest(token)`.

A token is `shoal_` and 43 characters of URL-safe base64 (256 random bits). Being
random and that long, a plain SHA-256 is a safe digest to keep (a slow password hash
buys nothing against a guess of 256 bits), and it can be looked up by index.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from shoal.domain.errors import Invalid

PREFIX = "shoal_"
HINT_CHARS = 10  # the prefix and four characters: enough to tell tokens apart in a list
TOKEN_RE = re.compile(r"^shoal_[A-Za-z0-9_-]{43}$")
_DURATION = re.compile(r"^(\d{1,6})([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def new() -> str:
    """A new token (shown once, never stored)."""
    return PREFIX + secrets.token_urlsafe(32)


def well_formed(token: str) -> bool:
    return bool(TOKEN_RE.match(token))


def digest(token: str) -> str:
    """What the database keeps of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def hint(token: str) -> str:
    return token[:HINT_CHARS]


def expiry(value: str | None, now: datetime) -> datetime | None:
    """When a token asked to live `value` expires: a duration (`30m`, `12h`, `90d`,
    `2w`), an ISO 8601 time with a zone, or none (never). Invalid otherwise, or when
    it is not in the future."""
    if value is None or value == "" or value == "never":
        return None
    m = _DURATION.match(value)
    if m:
        amount = int(m.group(1))
        if amount == 0:
            raise Invalid("expires must be in the future (got 0)", "expires")
        return now + timedelta(**{_UNITS[m.group(2)]: amount})
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(
            f"expires must be a duration (30m, 12h, 90d, 2w), an ISO 8601 time with a zone, "
            f"or never (got {value!r})",
            "expires",
        ) from None
    if when.tzinfo is None:
        raise Invalid(f"expires {value!r} needs a time zone (e.g. +00:00 or Z)", "expires")
    if when <= now:
        raise Invalid(f"expires {value!r} is not in the future", "expires")
    return when


@dataclass(frozen=True)
class TokenInfo:
    """What shoal keeps of an issued token (never the token)."""

    uuid: str
    hint: str
    project_id: str
    user_id: str
    role: str
    description: str | None
    created_by: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def usable(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)
