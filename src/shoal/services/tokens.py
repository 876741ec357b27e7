"""API tokens of the `local` authentication mode: issue, list, revoke (an admin's), and
the first admin token of a fresh deployment."""

from __future__ import annotations

from typing import Any

from shoal.db.engine import Database
from shoal.db.records import Session
from shoal.db.repo import tokens as repo
from shoal.db.types import utcnow
from shoal.domain import policy, tokens
from shoal.domain import validation as v
from shoal.domain.errors import Invalid
from shoal.services.context import Caller

CREATE_KEYS = frozenset({"project_id", "role", "user_id", "expires", "description"})
BOOTSTRAP_USER = "admin"


def issue(db: Database, caller: Caller, body: dict[str, Any]) -> tuple[tokens.TokenInfo, str]:
    """A new token for a project and role (what it may do: `policy.RULES`); the token
    itself is returned once and kept only as a digest."""
    policy.enforce(caller, "token:admin")
    v.reject_unknown("token", body, CREATE_KEYS)
    project = v.required_id("project_id", body.get("project_id"), "the project the token acts in")
    project = v.name("project_id", project)
    role = v.choice("role", body.get("role", policy.MEMBER), policy.ROLES)
    user = body.get("user_id")
    user = v.name("user_id", user) if user is not None else None
    description = v.string("description", body.get("description"))
    expires = body.get("expires")
    if expires is not None and not isinstance(expires, str):
        raise Invalid("expires must be a string such as 90d or 2027-01-01T00:00:00Z", "expires")
    now = utcnow()
    when = tokens.expiry(expires, now)
    token = tokens.new()
    with db.write() as s:
        info = repo.insert(
            s,
            token,
            project_id=project,
            user_id=user or f"token-{tokens.hint(token)[len(tokens.PREFIX) :]}",
            role=role,
            now=now,
            expires_at=when,
            description=description,
            created_by=caller.user_id,
        )
    return info, token


def listed(db: Database, caller: Caller, project_id: str | None) -> list[tokens.TokenInfo]:
    """The tokens of one project, or of every project."""
    policy.enforce(caller, "token:admin")
    with db.read() as s:
        return repo.listed(s, project_id)


def revoke(db: Database, caller: Caller, ident: str) -> tokens.TokenInfo:
    """Revoke a token by its uuid; it stops working at once in this process and within
    the token cache's lifetime in the others."""
    policy.enforce(caller, "token:admin")
    with db.write() as s:
        return repo.revoke(s, ident, utcnow())


def first_admin(db: Database, project_id: str) -> str | None:
    """On a deployment that has issued no token yet, an admin token for `project_id`
    (the deployment's default project); None once any token exists."""
    with db.write() as s:
        repo.lock(s)
        if repo.count(s):
            return None
        return _admin(s, project_id, "made on first start", "shoal")


def recovery_admin(db: Database, project_id: str, description: str) -> str:
    """A new admin token whatever exists (`shoal token bootstrap`: a lost admin token)."""
    with db.write() as s:
        return _admin(s, project_id, description, "shoal token bootstrap")


def _admin(s: Session, project_id: str, description: str, created_by: str) -> str:
    """A new admin token of the bootstrap user, stored; the token (shown once)."""
    token = tokens.new()
    repo.insert(
        s,
        token,
        project_id=project_id,
        user_id=BOOTSTRAP_USER,
        role=policy.ADMIN,
        now=utcnow(),
        description=description,
        created_by=created_by,
    )
    return token
