"""Cluster use cases: the four creation paths, update, delete, reads with derived counts."""

from __future__ import annotations

import secrets
from typing import Any, NoReturn

from shoal.db import credentials, events
from shoal.db.engine import Database
from shoal.db.records import ClusterRef, Health, Session
from shoal.db.repo import clusters, nodegroups, quotas, templates
from shoal.db.repo.paging import Page
from shoal.db.types import utcnow
from shoal.domain import derived, entries, jsonpatch, merge, policy, specs
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.bootstrap import versions
from shoal.domain.errors import Invalid, QuotaExceeded, Unsupported
from shoal.services import providers as zones_of
from shoal.services import resize, sources, vm_templates
from shoal.services.context import Caller
from shoal.services.views import ClusterView, GroupView

CREATE_KEYS = frozenset(specs.CLUSTER_ATTRS) | {
    "name",
    "cluster_template_id",
    "from_cluster",
    "node_groups",
    "project_id",
    "user_id",
}
# Magnum: node_count, health_status(_reason). shoal also takes what `openstack coe
# cluster update` offers: master_count (default master group) and labels.
PATCHABLE = frozenset(
    {"node_count", "health_status", "health_status_reason", "master_count", "labels"}
)


def create(
    db: Database,
    caller: Caller,
    body: dict[str, Any],
    quota_default: int,
    providers: m.ProviderNames = m.ProviderNames(),
    credential: tuple[str, str] | None = None,
) -> m.Cluster:
    """All attributes; from a template; from a cluster (clone); either plus overrides.
    Each node group's provider is resolved against `providers` and kept."""
    policy.enforce(caller, "cluster:create")
    v.reject_unknown("cluster", body, CREATE_KEYS)
    name = (
        v.name("name", body["name"], v.CLUSTER_NAME_MAX)
        if body.get("name") is not None
        else f"cluster-{secrets.token_hex(4)}"
    )
    request = specs.check_attrs("cluster", body, specs.CLUSTER_ATTRS)
    if not caller.at_least(1, 10) and request.get("node_count") == 0:
        raise Invalid("node_count 0 needs API microversion 1.10 or later", "node_count")
    if body.get("cluster_template_id") is not None and body.get("from_cluster") is not None:
        raise Invalid("give cluster_template_id or from_cluster, not both", "from_cluster")
    request_attrs = {k: x for k, x in request.items() if x is not None}
    given = entries.parse_list(body.get("node_groups"), "node_groups")
    vm_templates.enforce(caller, (e.attrs for e in given))
    zones = zones_of.known_zones(db)  # read before the write transaction (one connection at a time)
    offers = zones_of.known_offers(db)
    with db.write() as s:
        _check_quota(s, caller.project_id, quota_default)
        base: dict[str, Any] | None = None
        source: list[merge.GroupPlan] | None = None  # None: no template, no clone
        ct_id = source_id = ct_name = None
        if body.get("cluster_template_id") is not None:
            ident = v.string("cluster_template_id", body["cluster_template_id"]) or ""
            ct = templates.get_ct(s, caller.scope, ident)
            ct_id, ct_name = ct.uuid, ct.name
            base = merge.template_to_cluster_attrs(ct.attrs)
            source = sources.template_groups(s, ct)
        elif body.get("from_cluster") is not None:
            ident = v.string("from_cluster", body["from_cluster"]) or ""
            src = clusters.find(s, caller.scope, ident)
            ct_id, source_id, base = src.cluster_template_id, src.uuid, dict(src.attrs)
            source = merge.groups_from_cluster(nodegroups.of_cluster(s, src.uuid))
        attrs = merge.cluster_attrs(base, request_attrs)
        if ct_name is not None:
            attrs[merge.SOURCE_TEMPLATE_NAME] = ct_name
        versions.check_attrs(attrs)  # a Kubernetes version shoal can install, or a clear 400
        attrs["coe_version"] = derived.coe_version(attrs)
        attrs["cluster_distro"] = derived.cluster_distro(attrs)
        resolved = sources.resolve_all(s, caller.scope, given)
        plans = merge.plan_groups(
            attrs,
            request_attrs,
            entries.cluster_groups(attrs, source, resolved),
            allow_zero=caller.at_least(1, 10),
            providers=providers,
            limits=caller.limits,
        )
        plans = derived.pin_zone(plans, derived.label_zone(attrs), zones)
        for plan in plans:
            zones_of.check_options(offers, plan.name, plan.spec)
        cluster = clusters.insert(
            s,
            project_id=caller.project_id,
            user_id=caller.user_id,
            name=name,
            attrs=attrs,
            groups=plans,
            cluster_template_id=ct_id,
            source_id=source_id,
        )
        if credential is not None:  # its creator's trust: its servers go in their project
            credentials.insert(s, cluster.uuid, credential[0], credential[1], utcnow())
        how = (
            f"from template {ct_id}"
            if ct_id and not source_id
            else f"as a clone of {source_id}"
            if source_id
            else "from attributes"
        )
        events.record(
            s,
            cluster.uuid,
            "CreateRequested",
            f"cluster {name} requested {how} with node groups "
            + ", ".join(f"{p.name} ({p.spec.role} x{p.spec.node_count})" for p in plans),
        )
        return cluster


def _check_quota(s: Session, project_id: str, default: int) -> None:
    quotas.lock_project(s, project_id)
    row = quotas.find(s, project_id, quotas.CLUSTER)
    limit = row.hard_limit if row is not None else default
    if clusters.count_in_project(s, project_id) >= limit:
        raise QuotaExceeded("You have reached the maximum clusters per project")


def get(db: Database, caller: Caller, ident: str) -> ClusterView:
    """A cluster with counts, addresses and short node group views."""
    policy.enforce(caller, "cluster:get")
    with db.read() as s:
        c = clusters.get(s, caller.scope, ident)
        groups = nodegroups.of_cluster(s, c.uuid)
        live = nodegroups.live(s, [g.uuid for g in groups])
        workers, masters = clusters.addresses(s, c.uuid)
        return ClusterView(
            cluster=c,
            counts=clusters.counts(s, [c.uuid])[c.uuid],
            node_addresses=tuple(workers),
            master_addresses=tuple(masters),
            groups=tuple(GroupView(g, live[g.uuid]) for g in groups),
        )


def list_page(db: Database, caller: Caller, page: Page) -> list[ClusterView]:
    policy.enforce(caller, "cluster:get")
    with db.read() as s:
        page_rows = clusters.list_page(s, caller.scope, page)
        counts = clusters.counts(s, [c.uuid for c in page_rows])
        return [ClusterView(cluster=c, counts=counts[c.uuid]) for c in page_rows]


def update(db: Database, caller: Caller, ident: str, patch: Any) -> m.Cluster:
    """Magnum allows node_count (default worker group), health_status and its reason."""
    policy.enforce(caller, "cluster:update")
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, ident)
        current = {
            "health_status_reason": dict(cluster.health_status_reason),
            "labels": dict(cluster.attrs.get("labels") or {}),
        }
        changes = jsonpatch.apply(current, patch, PATCHABLE, kind="cluster")
        now = utcnow()
        health = _health(cluster.health_status, cluster.health_status_reason, changes)
        for key in ("node_count", "master_count"):
            if key in changes and changes[key] is None:
                raise Invalid(f"{key} cannot be removed", key)
        if "labels" in changes:
            labels = specs.labels("labels", changes["labels"])
            attrs = {**cluster.attrs, "labels": labels}
            clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now, attrs=attrs, health=health)
            health = None  # written with the labels
        if "node_count" in changes:
            resize.resize(s, caller, cluster, {"node_count": changes["node_count"]}, now)
        if "master_count" in changes:
            master = resize.default_group(s, cluster, master=True)
            body = {"node_count": changes["master_count"], "nodegroup": master.uuid}
            resize.resize(s, caller, cluster, body, now, field="master_count")
        if health is not None or not {"labels", "node_count", "master_count"} & set(changes):
            # new health, or no other change: the cluster's updated_at moves all the same
            clusters.set_health(s, cluster.uuid, health or _health_of(cluster), now)
        return clusters.get(s, caller.scope, cluster.uuid)


def _health(status: str | None, reason: dict[str, str], changes: dict[str, Any]) -> Health | None:
    """The cluster's health fields as `changes` set them (None: they set neither)."""
    if "health_status" not in changes and "health_status_reason" not in changes:
        return None
    if "health_status" in changes:
        hs = changes["health_status"]
        status = None if hs is None else v.choice("health_status", hs, specs.HEALTH_STATUSES)
    if "health_status_reason" in changes:
        reason = v.str_dict("health_status_reason", changes["health_status_reason"])
    return Health(status, reason)


def _health_of(cluster: ClusterRef) -> Health:
    return Health(cluster.health_status, cluster.health_status_reason)


def delete(db: Database, caller: Caller, ident: str) -> None:
    """Mark the cluster and its groups deleting; the conductor removes machines, then rows."""
    policy.enforce(caller, "cluster:delete")
    with db.write() as s:
        cluster = clusters.find(s, caller.scope, ident, for_update=True)
        clusters.mark_deleting(s, cluster.uuid, utcnow())
        events.record(
            s, cluster.uuid, "DeleteRequested", f"cluster {cluster.name} delete requested"
        )


def rotate_credentials(db: Database, caller: Caller, ident: str) -> NoReturn:
    """Magnum's `PATCH /v1/credentials/{cluster}` (new trust and OpenStack credentials
    for the cluster): not implemented, refused with what to do instead, after the
    same checks an update of the cluster has (NotFound, policy)."""
    policy.enforce(caller, "cluster:update")
    with db.read() as s:
        c = clusters.get(s, caller.scope, ident)
    raise Unsupported(
        f"rotating the credentials of cluster {c.name} is not implemented: shoal acts "
        "in its project with the Keystone trust its creator's token gave at create, and "
        "removes that trust when the cluster is deleted. To replace the cluster's CA, "
        f"use PATCH /v1/certificates/{c.uuid} (openstack coe ca rotate); to stop a "
        "trust, delete the cluster (a clone made with from_cluster gets a new trust "
        "from your token).",
        "cluster",
    )
