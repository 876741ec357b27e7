"""Domain objects -> Magnum wire objects (plus shoal's extra fields)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from fastapi import Request

from shoal.api.deps import links
from shoal.domain import conditions as cond
from shoal.domain import model as m
from shoal.domain import specs
from shoal.services.views import ClusterView, GroupView

CT_DEFAULTS: dict[str, Any] = {k: None for k in specs.TEMPLATE_ATTRS} | {
    "labels": {},
    "tls_disabled": False,
    "public": False,
    "hidden": False,
    "registry_enabled": False,
    "master_lb_enabled": False,
    "floating_ip_enabled": True,
    "server_type": "vm",
    "network_driver": "flannel",
    "coe": "kubernetes",
}
CLUSTER_LIST_FIELDS = (
    "uuid",
    "name",
    "cluster_template_id",
    "keypair",
    "docker_volume_size",
    "labels",
    "node_count",
    "master_count",
    "status",
    "health_status",
    "master_flavor_id",
    "flavor_id",
    "create_timeout",
    "links",
)
NG_LIST_FIELDS = (
    "id",
    "uuid",
    "name",
    "flavor_id",
    "image_id",
    "node_count",
    "role",
    "is_default",
    "status",
    "stack_id",
    "links",
)


def ts(value: datetime | None) -> str | None:
    """ISO 8601 with microseconds. `isoformat()` writes them whenever they are not 0
    and costs a third of `isoformat(timespec=...)` (three timestamps a node)."""
    if not value:
        return None
    return value.isoformat() if value.microsecond else value.isoformat(timespec="microseconds")


def conditions(conds: tuple[m.Condition, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "last_transition": ts(c.last_transition),
        }
        for c in conds
    ]


def ngt(request: Request, t: m.NodeGroupTemplate) -> dict[str, Any]:
    return {
        "uuid": t.uuid,
        "id": t.id,
        "name": t.name,
        "project_id": t.project_id,
        "cluster_template_id": t.cluster_template_id,
        "source_id": t.source_id,
        **specs.spec_as_attrs(t.spec),
        "created_at": ts(t.created_at),
        "updated_at": ts(t.updated_at),
        "links": links(request, f"nodegrouptemplates/{t.uuid}"),
    }


def ct_entry(request: Request, x: m.TemplateEntry) -> dict[str, Any]:
    """An entry of a cluster template: an embedded NGT (`nodegroup_template_id` null),
    or a reference to a standalone one (its uuid in `nodegroup_template_id`, and only
    the attributes the entry sets over it)."""
    if isinstance(x, m.NodeGroupTemplate):
        return {**ngt(request, x), "nodegroup_template_id": None}
    return {
        "uuid": x.uuid,
        "id": x.id,
        "name": x.name,
        "project_id": x.project_id,
        "cluster_template_id": x.cluster_template_id,
        "nodegroup_template_id": x.nodegroup_template_id,
        **x.overrides,
        "created_at": ts(x.created_at),
        "updated_at": ts(x.updated_at),
        "links": links(request, f"nodegrouptemplates/{x.nodegroup_template_id}"),
    }


def cluster_template(request: Request, ct: m.ClusterTemplate) -> dict[str, Any]:
    return {
        **CT_DEFAULTS,
        **ct.attrs,
        "uuid": ct.uuid,
        "name": ct.name,
        "project_id": ct.project_id,
        "user_id": ct.user_id,
        "source_id": ct.source_id,
        "node_group_templates": [ct_entry(request, n) for n in ct.node_group_templates],
        "created_at": ts(ct.created_at),
        "updated_at": ts(ct.updated_at),
        "links": links(request, f"clustertemplates/{ct.uuid}"),
    }


def _stack_key(request: Request) -> str:
    return "cluster_id" if request.state.version >= (1, 13) else "stack_id"


def cluster(request: Request, view: ClusterView, *, detail: bool = True) -> dict[str, Any]:
    c = view.cluster
    a = c.attrs
    obj: dict[str, Any] = {
        "uuid": c.uuid,
        "name": c.name,
        "cluster_template_id": c.cluster_template_id,
        "keypair": a.get("keypair"),
        "docker_volume_size": a.get("docker_volume_size"),
        "labels": dict(a.get("labels") or {}),
        "node_count": view.counts.node_count,
        "master_count": view.counts.master_count,
        "status": c.status,
        "health_status": c.health_status,
        "master_flavor_id": a.get("master_flavor_id"),
        "flavor_id": a.get("flavor_id"),
        "create_timeout": a.get("create_timeout"),
        _stack_key(request): c.uuid,
        "links": links(request, f"clusters/{c.uuid}"),
    }
    if not detail:
        return obj
    failed = {
        g.group.name: g.group.status_reason or ""
        for g in view.groups
        if g.group.status.endswith("FAILED")
    }
    obj.update(
        status_reason=c.status_reason,
        health_status_reason=dict(c.health_status_reason),
        discovery_url=a.get("discovery_url"),
        api_address=c.api_address,
        coe_version=a.get("coe_version"),
        cluster_distro=a.get("cluster_distro"),
        container_version=a.get("container_version"),
        project_id=c.project_id,
        user_id=c.user_id,
        node_addresses=list(view.node_addresses),
        master_addresses=list(view.master_addresses),
        fixed_network=a.get("fixed_network"),
        fixed_subnet=a.get("fixed_subnet"),
        floating_ip_enabled=a.get("floating_ip_enabled", True),
        master_lb_enabled=a.get("master_lb_enabled", False),
        merge_labels=bool(a.get("merge_labels", False)),
        labels_overridden=a.get("labels_overridden", {}),
        labels_added=a.get("labels_added", {}),
        labels_skipped=a.get("labels_skipped", {}),
        created_at=ts(c.created_at),
        updated_at=ts(c.updated_at),
        coe=a.get("coe", "kubernetes"),
        image_id=a.get("image_id"),
        provider=a.get("provider"),
        source_id=c.source_id,
        generation=c.generation,
        observed_generation=c.observed_generation,
        conditions=conditions(c.conditions),
        node_groups=[nodegroup(request, g, detail=False) for g in view.groups],
    )
    if failed:
        obj["faults"] = failed
    return obj


def nodegroup(request: Request, view: GroupView, *, detail: bool = True) -> dict[str, Any]:
    g = view.group
    s = g.spec
    obj: dict[str, Any] = {
        "id": g.id,
        "uuid": g.uuid,
        "name": g.name,
        "flavor_id": s.flavor_id,
        "image_id": s.image_id,
        "node_count": s.node_count,
        "role": s.role,
        "is_default": g.is_default,
        "status": g.status,
        "provider": s.provider,
        "stack_id": g.provider_ref or g.uuid,
        "links": links(request, f"clusters/{g.cluster_id}/nodegroups/{g.uuid}"),
    }
    if not detail:
        return obj
    health = cond.health_status(g.conditions)
    obj.update(
        cluster_id=g.cluster_id,
        project_id=g.project_id,
        docker_volume_size=s.docker_volume_size,
        labels=dict(s.labels),
        min_node_count=s.min_node_count,
        max_node_count=s.max_node_count,
        node_addresses=list(view.node_addresses),
        status_reason=g.status_reason,
        version=g.version,
        merge_labels=s.merge_labels,
        labels_overridden={},
        labels_added={},
        labels_skipped={},
        availability_zones=list(s.availability_zones),
        networks=list(s.networks),
        security_groups=list(s.security_groups),
        placement_policy=s.placement_policy,
        boot_volume_size=s.boot_volume_size,
        provider_options=dict(s.provider_options),
        vms=[dict(x) for x in s.vms],
        vm_template=s.vm_template,
        deletion_policy=str(s.deletion_policy),
        rollout=dataclasses.asdict(s.rollout),
        health_policy=dataclasses.asdict(s.health),
        conditions=conditions(g.conditions),
        health_status=health[0],
        health_status_reason=health[1],
        source_id=g.source_id,
        generation=g.generation,
        observed_generation=g.observed_generation,
        nodes_total=view.live.total,
        nodes_ready=view.live.ready,
        nodes_failed=view.live.failed,
        created_at=ts(g.created_at),
        updated_at=ts(g.updated_at),
    )
    if request.state.version >= (1, 14):
        obj["node_labels"] = dict(s.node_labels)
        obj["node_taints"] = [t.as_dict() for t in s.node_taints]
    return obj


def node(request: Request, n: m.Node, group_name: str, role: str) -> dict[str, Any]:
    return {
        "uuid": n.uuid,
        "name": n.name,
        "nodegroup_id": n.nodegroup_id,
        "nodegroup_name": group_name,
        "role": role,
        "state": str(n.state),
        "availability_zone": n.availability_zone,
        "address": n.address,
        "image_id": n.image_id,
        "flavor_id": n.flavor_id,
        "provider_id": n.provider_id,
        "reason": n.reason,
        "to_delete": n.to_delete,
        "created_at": ts(n.created_at),
        "ready_at": ts(n.ready_at),
        "revision": n.revision,
        "agent_seen_at": ts(n.agent_seen_at),
        "repair_step": n.repair_step,
        "vm": n.vm_slot.rsplit(":", 1)[1] if n.vm_slot else None,  # its virt host's VM slot
    }


def event(e: m.Event) -> dict[str, Any]:
    return {
        "id": e.id,
        "time": ts(e.time),
        "type": e.type,
        "reason": e.reason,
        "message": e.message,
        "nodegroup_id": e.nodegroup_id,
        "node_id": e.node_id,
    }
