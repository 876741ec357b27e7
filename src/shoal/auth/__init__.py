"""Who makes a request: each authentication mode turns a request's headers into a
`policy.Principal` (project, user, roles), or refuses it with `NotAuthenticated`.

- `local` (the embedded default): tokens shoal issues itself (`tokens.py`);
- `keystone`: tokens a real Keystone issued and validates (`keystone.py`);
- `none`: no authentication, for development only (`headers.py`).

What a principal may do is `domain/policy.py`'s business; this package only says who
it is. `build` is called once, by the composition root (`shoal.runtime`).
"""

from __future__ import annotations

from typing import Any

from shoal.auth.base import Authenticator
from shoal.settings import Settings

__all__ = ["Authenticator", "build"]


def build(settings: Settings, db: Any) -> Authenticator:
    """The authenticator of `settings.auth` (a `shoal.db.engine.Database` for `local`)."""
    if settings.auth == "keystone":
        from shoal.auth.keystone import KeystoneTokens

        return KeystoneTokens(settings.keystone)
    if settings.auth == "none":
        from shoal.auth import headers

        return headers.TrustedHeaders(settings.default_project)
    from shoal.auth import local

    return local.LocalTokens(db, settings.token_cache_seconds)
