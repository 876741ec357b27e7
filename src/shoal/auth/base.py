"""What every authentication mode shares: the `Authenticator` seam, the request's
token, and a cache of the principals tokens were validated as."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from shoal.domain import tokens
from shoal.domain.policy import Principal

TOKEN_HEADER = "x-auth-token"


class Authenticator(Protocol):
    challenge: str | None  # a 401's WWW-Authenticate, where the mode names one

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """The request's principal; NotAuthenticated (401) when it names none or a bad one."""
        ...

    def forget(self) -> None:
        """Drop what is cached (a token was revoked in this process)."""
        ...

    def delegate(self, headers: Mapping[str, str], principal: Principal) -> dict[str, str] | None:
        """At a cluster create: a credential with which the conductor acts for the caller
        in the caller's project (a Keystone trust), or None where the mode has none (the
        provider's own identity is used). Unavailable (503) when it cannot be made now."""
        ...

    def undelegate(self, credential: Mapping[str, str]) -> None:
        """Remove a credential `delegate` made (its cluster is gone); gone already is
        done. Unavailable when it cannot be done now."""
        ...

    def close(self) -> None: ...


class NoDelegation:
    """For the modes whose callers cannot lend shoal a credential (`local`, `none`):
    clusters use their provider's own identity. No challenge on a 401 either."""

    challenge: str | None = None

    def delegate(self, headers: Mapping[str, str], principal: Principal) -> dict[str, str] | None:
        return None

    def undelegate(self, credential: Mapping[str, str]) -> None:
        return None


def token_of(headers: Mapping[str, str]) -> str | None:
    """The request's token: `X-Auth-Token` (OpenStack's), else `Authorization: Bearer`."""
    token = headers.get(TOKEN_HEADER)
    if token:
        return token.strip()
    bearer = headers.get("authorization", "")
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip() or None
    return None


class PrincipalCache:
    """Who the tokens validated lately are, by the token's digest (never the token),
    each trusted for `seconds` and never past the token's own expiry; at most
    CACHE_MAX at once (it starts again when full)."""

    CACHE_MAX = 10_000

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._entries: dict[str, tuple[Principal, float]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Principal | None:
        with self._lock:
            hit = self._entries.get(key)
        return hit[0] if hit is not None and hit[1] > time.monotonic() else None

    def put(self, key: str, principal: Principal, expires_at: datetime | None) -> None:
        now = time.monotonic()
        until = now + self.seconds
        if expires_at is not None:
            until = min(until, now + (expires_at - datetime.now(UTC)).total_seconds())
        with self._lock:
            if len(self._entries) >= self.CACHE_MAX:
                self._entries.clear()
            self._entries[key] = (principal, until)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def key_of(token: str) -> str:
    """What a cache keeps a token under: its digest (`domain.tokens.digest`)."""
    return tokens.digest(token)
