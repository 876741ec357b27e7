"""Authentication mode `local`: tokens shoal issued (`shoal token create`), looked up by
digest and trusted for `cache_seconds` by this process (never past their expiry)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from shoal import auth
from shoal.db.engine import Database
from shoal.db.repo import tokens as repo
from shoal.db.types import utcnow
from shoal.domain import policy, tokens
from shoal.domain.errors import NotAuthenticated
from shoal.domain.policy import Principal

CACHE_MAX = 10_000  # tokens trusted at once; the cache starts again when full
MISSING = (
    "Authentication required: send a token in X-Auth-Token (shoal token create; the first "
    "admin token is in the data directory's admin-token file)"
)


class LocalTokens(auth.NoDelegation):
    def __init__(self, db: Database, cache_seconds: float) -> None:
        self.db = db
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._lock = threading.Lock()

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        token = auth.token_of(headers)
        if not token:
            raise NotAuthenticated(MISSING)
        key = tokens.digest(token)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        if not tokens.well_formed(token):
            raise NotAuthenticated("The token is not one shoal issued (it is malformed)")
        with self.db.read() as s:
            info = repo.by_token(s, token)
        wall = utcnow()
        if info is None:
            raise NotAuthenticated("The token is not one shoal issued, or it was deleted")
        if info.revoked_at is not None:
            raise NotAuthenticated(f"The token {info.hint}... was revoked")
        if info.expires_at is not None and info.expires_at <= wall:
            raise NotAuthenticated(f"The token {info.hint}... expired; ask for a new one")
        principal = Principal(info.project_id, info.user_id, policy.roles_of([info.role]))
        until = now + self.cache_seconds
        if info.expires_at is not None:
            until = min(until, now + (info.expires_at - wall).total_seconds())
        with self._lock:
            if len(self._cache) >= CACHE_MAX:
                self._cache.clear()
            self._cache[key] = (principal, until)
        return principal

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()

    def close(self) -> None:
        self.forget()
