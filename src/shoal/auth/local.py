"""Authentication mode `local`: tokens shoal issued (`shoal token create`), looked up by
digest and trusted for `cache_seconds` by this process (never past their expiry)."""

from __future__ import annotations

from collections.abc import Mapping

from shoal.auth import base
from shoal.db.engine import Database
from shoal.db.repo import tokens as repo
from shoal.db.types import utcnow
from shoal.domain import policy, tokens
from shoal.domain.errors import NotAuthenticated
from shoal.domain.policy import Principal

MISSING = (
    "Authentication required: send a token in X-Auth-Token (shoal token create; the first "
    "admin token is in the data directory's admin-token file)"
)


class LocalTokens(base.NoDelegation):
    def __init__(self, db: Database, cache_seconds: float) -> None:
        self.db = db
        self._cache = base.PrincipalCache(cache_seconds)

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        token = base.token_of(headers)
        if not token:
            raise NotAuthenticated(MISSING)
        key = base.key_of(token)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if not tokens.well_formed(token):
            raise NotAuthenticated("The token is not one shoal issued (it is malformed)")
        with self.db.read() as s:
            info = repo.by_digest(s, key)
        if info is None:
            raise NotAuthenticated("The token is not one shoal issued, or it was deleted")
        if info.revoked_at is not None:
            raise NotAuthenticated(f"The token {info.hint}... was revoked")
        if info.expires_at is not None and info.expires_at <= utcnow():
            raise NotAuthenticated(f"The token {info.hint}... expired; ask for a new one")
        principal = Principal(info.project_id, info.user_id, policy.roles_of([info.role]))
        self._cache.put(key, principal, info.expires_at)
        return principal

    def forget(self) -> None:
        self._cache.clear()

    def close(self) -> None:
        self.forget()
