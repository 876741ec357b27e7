"""Small reads and writes: nodes, events, stats, conductors (mservices), quotas."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select

from shoal.db import events, registry
from shoal.db.engine import Database
from shoal.db.repo import clusters, lookup, nodegroups, nodes, quotas
from shoal.db.repo.paging import Page
from shoal.db.tables import ClusterRow, ConductorRow, NodeGroupRow, QuotaRow
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain import policy
from shoal.domain import validation as v
from shoal.domain.errors import Invalid, NotFound
from shoal.services.context import Caller

HEARTBEAT_SECONDS = 10.0


@dataclass(frozen=True)
class ServiceInfo:
    row: ConductorRow
    state: str


def list_nodes(
    db: Database, caller: Caller, cluster_ident: str, page: Page, nodegroup: str | None
) -> list[tuple[m.Node, str, str]]:
    policy.enforce(caller, "cluster:get")
    with db.read() as s:
        cluster = clusters.find_row(s, caller.scope, cluster_ident)
        ng_uuid = nodegroups.find_row(s, cluster.uuid, nodegroup).uuid if nodegroup else None
        return nodes.list_page(s, cluster.uuid, page, ng_uuid)


def list_events(
    db: Database, caller: Caller, cluster_ident: str, after: int, limit: int
) -> list[m.Event]:
    policy.enforce(caller, "cluster:get")
    with db.read() as s:
        cluster = clusters.find_row(s, caller.scope, cluster_ident)
        return events.list_for_cluster(s, cluster.uuid, after_id=after, limit=limit)


def stats(db: Database, caller: Caller) -> dict[str, int]:
    """Magnum's stats: clusters and nodes (sum of desired counts) of the project, or
    of every project (an admin's `all_tenants`)."""
    policy.enforce(caller, "stats:get")
    scope = lookup.in_scope(ClusterRow.project_id, caller.scope)
    with db.read() as s:
        n_clusters = s.scalar(select(func.count()).select_from(ClusterRow).where(*scope))
        n_nodes = s.scalar(
            select(func.coalesce(func.sum(NodeGroupRow.node_count), 0))
            .join(ClusterRow, ClusterRow.uuid == NodeGroupRow.cluster_uuid)
            .where(*scope)
        )
        return {"clusters": int(n_clusters or 0), "nodes": int(n_nodes or 0)}


def mservices(
    db: Database, caller: Caller, heartbeat_s: float = HEARTBEAT_SECONDS
) -> list[ServiceInfo]:
    """Conductor rows; `up` when seen within three heartbeats."""
    policy.enforce(caller, "mservice:get_all")
    now = utcnow()
    with db.read() as s:
        rows = list(
            s.scalars(
                select(ConductorRow)
                .where(ConductorRow.binary == registry.BINARY)
                .order_by(ConductorRow.id)
            )
        )
    return [ServiceInfo(r, _state(r.last_seen_up, now, heartbeat_s)) for r in rows]


def _state(seen: datetime | None, now: datetime, heartbeat_s: float) -> str:
    return "up" if seen and now - seen <= timedelta(seconds=3 * heartbeat_s) else "down"


def quota_list(db: Database, caller: Caller) -> list[QuotaRow]:
    """Every project's quotas (an admin's `all_tenants`), else the caller's project's."""
    policy.enforce(caller, "quota:get_all" if caller.all_projects else "quota:get")
    with db.read() as s:
        return quotas.all_rows(s, None if caller.all_projects else caller.project_id)


def quota_get(
    db: Database, caller: Caller, project_id: str, resource: str, default: int
) -> QuotaRow:
    """The row, or the default limit as an unsaved row (Magnum shows defaults too).
    A project's own quota is its reader's to see; another project's an admin's."""
    policy.enforce(caller, "quota:get" if project_id == caller.project_id else "quota:get_all")
    _resource(resource)
    with db.read() as s:
        row = quotas.find(s, project_id, resource)
    return row or QuotaRow(project_id=project_id, resource=resource, hard_limit=default)


def quota_set(
    db: Database, caller: Caller, project_id: str, resource: str, hard_limit: object
) -> QuotaRow:
    """Create or change a project's quota (an admin's: a project cannot raise its own)."""
    policy.enforce(caller, "quota:update")
    _resource(resource)
    if not project_id:
        raise Invalid("project_id is required", "project_id")
    v.string("project_id", project_id)  # at most the column's 255 characters
    limit = v.integer("hard_limit", hard_limit, lo=0)
    with db.write() as s:
        return quotas.upsert(s, project_id, resource, limit)


def quota_delete(db: Database, caller: Caller, project_id: str, resource: str) -> None:
    policy.enforce(caller, "quota:delete")
    _resource(resource)
    with db.write() as s:
        row = quotas.find(s, project_id, resource)
        if row is None:
            raise NotFound("Quota", f"{project_id}/{resource}")
        quotas.remove(s, row)


def _resource(resource: str) -> None:
    if resource != quotas.CLUSTER:
        raise Invalid(f"resource must be {quotas.CLUSTER} (got {resource!r})", "resource")
