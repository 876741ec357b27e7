"""Node group use cases: create (attributes, NGT, another group, + overrides), update, delete."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from shoal.agent import protocol
from shoal.db import events
from shoal.db.engine import Database
from shoal.db.records import Session
from shoal.db.repo import clusters, nodegroups, nodes, operations
from shoal.db.repo.paging import Page
from shoal.db.types import utcnow
from shoal.domain import derived, entries, jsonpatch, merge, policy, specs
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid
from shoal.services import providers as zones_of
from shoal.services import sources, virt, vm_templates
from shoal.services.context import Caller
from shoal.services.views import GroupView

CREATE_KEYS = specs.NODEGROUP_KEYS | {
    "name",
    "nodegroup_template_id",
    "from_nodegroup",
    "project_id",
}
PATCHABLE = frozenset(
    {
        "min_node_count",
        "max_node_count",
        "node_labels",
        "node_taints",
        "labels",
        "availability_zones",
        "deletion_policy",
        "rollout",
        "health_policy",
        "image_id",
        "flavor_id",
        "vms",
        "vm_template",
    }
)
NEEDS_1_14 = ("node_labels", "node_taints")


def _gate_114(caller: Caller, keys: Any) -> None:
    if not caller.at_least(1, 14):
        for k in NEEDS_1_14:
            if k in keys:
                raise Invalid(f"{k} needs API microversion 1.14 or later", k)


def create(
    db: Database,
    caller: Caller,
    cluster_ident: str,
    body: dict[str, Any],
    providers: m.ProviderNames = m.ProviderNames(),
) -> GroupView:
    policy.enforce(caller, "nodegroup:create")
    v.reject_unknown("nodegroup", body, CREATE_KEYS)
    _gate_114(caller, body)
    if body.get("name") is None:
        raise Invalid("name is required", "name")
    name = v.name("name", body["name"])
    entry = entries.parse({k: x for k, x in body.items() if k != "project_id"}, "nodegroup")
    vm_templates.enforce(caller, [entry.attrs])
    if entry.attrs.get("role") == m.ROLE_MASTER:
        raise Invalid("Creating master nodegroups is currently not supported.", "role")
    zones = zones_of.known_zones(db)  # read before the write transaction
    offers = zones_of.known_offers(db)
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, cluster_ident)
        source = sources.resolve(s, caller.scope, entry, cluster_uuid=cluster.uuid)
        if source is not None and source.spec.role == m.ROLE_MASTER:
            # A copy of a master group joins as a worker (masters are not added here).
            source = dataclasses.replace(
                source, spec=dataclasses.replace(source.spec, role=m.ROLE_WORKER)
            )
        attrs = cluster.attrs
        plan = merge.fill_from_cluster(entries.plan(entry, source), attrs)
        plan = merge.with_provider(plan, attrs, providers)
        zone = derived.label_zone({"labels": plan.spec.labels})  # its labels, else the cluster's
        plan = derived.pin_zone([plan], zone, zones)[0]
        zones_of.check_options(offers, name, plan.spec)
        v.spec_nodes(plan.spec, caller.limits)
        v.counts(plan.spec, allow_zero=caller.at_least(1, 10))
        if not plan.spec.image_id:
            raise Invalid("image_id is required", "image_id")
        groups = [g for g in nodegroups.of_cluster(s, cluster.uuid) if not g.deleting]
        if plan.spec.node_count:
            total = sum(g.spec.node_count for g in groups) + plan.spec.node_count
            v.cluster_nodes(total, caller.limits)
        if any(g.name == name for g in groups):
            raise Conflict(f"A node group with name {name} already exists in the cluster")
        now = utcnow()
        (group,) = nodegroups.insert(s, cluster, [plan], now=now)
        clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
        events.record(
            s,
            cluster.uuid,
            "NodeGroupCreateRequested",
            f"node group {name} ({plan.spec.role} x{plan.spec.node_count}) requested",
            nodegroup_uuid=group.uuid,
        )
        return GroupView(group)


def get(db: Database, caller: Caller, cluster_ident: str, ident: str) -> GroupView:
    policy.enforce(caller, "nodegroup:get")
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        group = nodegroups.find(s, cluster.uuid, ident)
        live = nodegroups.live(s, [group.uuid])[group.uuid]
        return GroupView(group, live, tuple(nodegroups.addresses(s, group.uuid)))


def list_page(
    db: Database, caller: Caller, cluster_ident: str, page: Page, role: str | None
) -> list[GroupView]:
    policy.enforce(caller, "nodegroup:get")
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        groups = nodegroups.list_page(s, cluster.uuid, page, role)
        live = nodegroups.live(s, [g.uuid for g in groups])
        return [GroupView(g, live[g.uuid]) for g in groups]


def update(db: Database, caller: Caller, cluster_ident: str, ident: str, patch: Any) -> GroupView:
    """min/max, node labels and taints (Magnum), plus shoal's policies, AZs, image, flavor."""
    policy.enforce(caller, "nodegroup:update")
    offers = zones_of.known_offers(db)  # read before the write transaction
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, cluster_ident)
        found = nodegroups.find(s, cluster.uuid, ident, for_update=True)
        spec = found.spec
        current = specs.spec_as_attrs(spec)
        changes = jsonpatch.apply(current, patch, PATCHABLE, kind="nodegroup")
        vm_templates.enforce(caller, [changes], kept=[spec.vm_template])
        _gate_114(caller, changes)
        if found.deleting:
            raise Conflict(f"NodeGroup {found.name} is being deleted")
        defaults = specs.spec_as_attrs(m.NodeGroupSpec())
        attrs = {k: (defaults.get(k) if x is None else x) for k, x in changes.items()}
        new = specs.apply_ng_attrs(spec, attrs)
        if "labels" in changes:
            zones_of.refuse_option_change(offers, found.name, spec, new)
        for key in ("min_node_count", "max_node_count"):
            value = getattr(new, key)
            if key in changes and value is not None:
                v.group_nodes(key, value, caller.limits)
        v.counts(new, allow_zero=caller.at_least(1, 10))
        if "vms" in changes:
            virt.refuse_removing_taken_slots(s, cluster.uuid, found.uuid, spec, new)
        now = utcnow()
        group = nodegroups.write_spec(s, found.uuid, new, "UPDATE_IN_PROGRESS", now)
        clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
        events.record(
            s,
            cluster.uuid,
            "NodeGroupUpdateRequested",
            f"node group {found.name}: {', '.join(sorted(changes))} changed",
            nodegroup_uuid=found.uuid,
        )
        if {"node_labels", "node_taints"} & set(changes):
            _labels_in_place(s, cluster.project_id, cluster.uuid, group, now)
        return GroupView(group)


def _labels_in_place(
    s: Session, project_id: str, cluster_uuid: str, group: m.NodeGroup, now: datetime
) -> None:
    """New labels and taints reach the group's existing nodes in place, through their
    agents (a set-labels operation on every node whose agent reports), never through
    a rollout; new nodes get them at creation."""
    members = [
        n.uuid
        for n in nodes.of_group(s, group.uuid)
        if n.state is m.NodeState.ACTIVE and n.agent_seen_at is not None
    ]
    if not members:
        return  # no agent to tell: the nodes learn them when they are made anew
    params = {
        "labels": dict(group.spec.node_labels),
        "taints": [t.as_dict() for t in group.spec.node_taints],
    }
    operations.insert(
        s,
        cluster_uuid=cluster_uuid,
        group_uuid=group.uuid,
        project_id=project_id,
        kind=protocol.SET_LABELS,
        params=params,
        nodes=members,
        batch_size=len(members),
        now=now,
    )


def delete(
    db: Database, caller: Caller, cluster_ident: str, ident: str, *, force: bool = False
) -> None:
    """Delete a node group; one of virt hosts carrying VMs only when forced."""
    policy.enforce(caller, "nodegroup:delete")
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, cluster_ident)
        group = nodegroups.find(s, cluster.uuid, ident, for_update=True)
        if group.is_default:
            raise Invalid(
                f"Deleting a default nodegroup is not supported ({group.name})", "nodegroup"
            )
        if group.spec.role == m.ROLE_VIRT:
            hosts = [n.name for n in nodes.of_group(s, group.uuid)]
            virt.refuse_taking_down(s, cluster.uuid, group.name, hosts, force, "deleting it")
        now = utcnow()
        nodegroups.touch(s, group.uuid, "DELETE_IN_PROGRESS", now, deleting=True)
        clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
        events.record(
            s,
            cluster.uuid,
            "NodeGroupDeleteRequested",
            f"node group {group.name} delete requested",
            nodegroup_uuid=group.uuid,
        )
