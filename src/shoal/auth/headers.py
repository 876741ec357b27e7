"""Authentication mode `none`, for development only: nobody is asked who they are.

The project is `X-Project-Id` (else the deployment's default project), the user
`X-User-Id`, and the roles `X-Roles` (comma-separated; default admin): every request
may do anything in any project it names. `shoal serve` warns at every start.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.auth import base
from shoal.domain import policy, validation
from shoal.domain.errors import Invalid
from shoal.domain.policy import Principal


class TrustedHeaders(base.NoDelegation):
    def __init__(self, default_project: str) -> None:
        self.default_project = default_project

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        project = _id(headers, "X-Project-Id") or self.default_project
        user = _id(headers, "X-User-Id") or "admin"
        raw = headers.get("x-roles")
        roles = policy.roles_of(raw.split(",")) if raw else frozenset({policy.ADMIN})
        return Principal(project, user, roles)

    def forget(self) -> None:
        pass

    def close(self) -> None:
        pass


def _id(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name.lower())
    if value is not None and len(value) > validation.NAME_MAX:
        raise Invalid(f"{name} must be at most {validation.NAME_MAX} characters", name)
    return value or None
