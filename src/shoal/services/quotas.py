"""Per-project quotas (Magnum's /v1/quotas): read, set and removed by admins; a
project's reader sees its own."""

from __future__ import annotations

from shoal.db.engine import Database
from shoal.db.repo import quotas
from shoal.domain import policy
from shoal.domain import validation as v
from shoal.domain.errors import Invalid, NotFound
from shoal.domain.fleet import Quota
from shoal.services.context import Caller


def quota_list(db: Database, caller: Caller) -> list[Quota]:
    """Every project's quotas (an admin's `all_tenants`), else the caller's project's."""
    policy.enforce(caller, "quota:get_all" if caller.all_projects else "quota:get")
    with db.read() as s:
        return quotas.listed(s, None if caller.all_projects else caller.project_id)


def quota_get(db: Database, caller: Caller, project_id: str, resource: str, default: int) -> Quota:
    """The quota, or the default limit as an unsaved one (Magnum shows defaults too).
    A project's own quota is its reader's to see; another project's an admin's."""
    policy.enforce(caller, "quota:get" if project_id == caller.project_id else "quota:get_all")
    _resource(resource)
    with db.read() as s:
        got = quotas.get(s, project_id, resource)
    return got or Quota(project_id=project_id, resource=resource, hard_limit=default)


def quota_set(
    db: Database, caller: Caller, project_id: str, resource: str, hard_limit: object
) -> Quota:
    """Create or change a project's quota (an admin's: a project cannot raise its own)."""
    policy.enforce(caller, "quota:update")
    _resource(resource)
    v.required_id("project_id", project_id)  # at most the column's 255 characters
    limit = v.integer("hard_limit", hard_limit, lo=0)
    with db.write() as s:
        return quotas.put(s, project_id, resource, limit)


def quota_delete(db: Database, caller: Caller, project_id: str, resource: str) -> None:
    policy.enforce(caller, "quota:delete")
    _resource(resource)
    with db.write() as s:
        if not quotas.delete(s, project_id, resource):
            raise NotFound("Quota", f"{project_id}/{resource}")


def _resource(resource: str) -> None:
    if resource != quotas.CLUSTER:
        raise Invalid(f"resource must be {quotas.CLUSTER} (got {resource!r})", "resource")
