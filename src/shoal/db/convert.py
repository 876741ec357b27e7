"""Rows <-> domain values. The only place that knows how specs sit in JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeAlias

from sqlalchemy import Row

from shoal.db import tables as t
from shoal.db.records import ClusterRef, TemplateRef
from shoal.domain import model as m
from shoal.domain import specs

# A node group's counts and provider are columns, not part of its JSON spec.
_COLUMNS = ("node_count", "min_node_count", "max_node_count", "provider")

# A Core row that selects all of a table's columns, or its record (repo/paging.py:
# records), reads like that table's ORM object (attribute access by column name):
# the hot reads convert those instead.
CoreRow: TypeAlias = Row[*tuple[Any, ...]] | Any  # a record: a named tuple made at run time


def ngt_spec_to_json(spec: m.NodeGroupSpec) -> dict[str, Any]:
    """A full spec, counts included: the wire form plus what only storage keeps."""
    return specs.spec_as_attrs(spec)


def ng_spec_to_json(spec: m.NodeGroupSpec) -> dict[str, Any]:
    """The JSON part of a node group's spec (its counts and provider are columns), with
    what only a running group has (a rollout held by request)."""
    out = {k: v for k, v in ngt_spec_to_json(spec).items() if k not in _COLUMNS}
    out["rollout_hold"] = spec.rollout_hold
    return out


def ng_spec_from_json(
    data: dict[str, Any], counts: tuple[int, int, int | None] | None = None
) -> m.NodeGroupSpec:
    """Build a spec from JSON; `counts` (node, min, max) overrides the JSON's counts."""
    node_count, min_count, max_count = counts or (
        int(data.get("node_count", 1)),
        int(data.get("min_node_count", 0)),
        data.get("max_node_count"),
    )
    rollout = data.get("rollout") or {}
    health = data.get("health_policy") or {}
    return m.NodeGroupSpec(
        role=data.get("role", m.ROLE_WORKER),
        flavor_id=data.get("flavor_id"),
        image_id=data.get("image_id"),
        docker_volume_size=data.get("docker_volume_size"),
        availability_zones=tuple(data.get("availability_zones") or ()),
        labels=dict(data.get("labels") or {}),
        node_labels=dict(data.get("node_labels") or {}),
        node_taints=tuple(m.Taint(**x) for x in data.get("node_taints") or ()),
        node_count=node_count,
        min_node_count=min_count,
        max_node_count=max_count,
        deletion_policy=m.DeletionPolicy(data.get("deletion_policy", "newest")),
        rollout=m.RolloutPolicy(**rollout),
        health=m.HealthPolicy(**health),
        merge_labels=bool(data.get("merge_labels", False)),
        coe_version=data.get("coe_version"),
        vms=tuple(data.get("vms") or ()),
        vm_template=data.get("vm_template"),
        provider=data.get("provider"),
        networks=tuple(data.get("networks") or ()),
        security_groups=tuple(data.get("security_groups") or ()),
        placement_policy=data.get("placement_policy"),
        boot_volume_size=data.get("boot_volume_size"),
        provider_options=dict(data.get("provider_options") or {}),
        rollout_hold=data.get("rollout_hold"),
    )


def conditions_to_json(conds: tuple[m.Condition, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "last_transition": c.last_transition.isoformat() if c.last_transition else None,
        }
        for c in conds
    ]


def conditions_from_json(data: list[dict[str, Any]] | None) -> tuple[m.Condition, ...]:
    out = []
    for c in data or ():
        lt = c.get("last_transition")
        out.append(
            m.Condition(
                type=c["type"],
                status=c["status"],
                reason=c.get("reason", ""),
                message=c.get("message", ""),
                last_transition=datetime.fromisoformat(lt) if lt else None,
            )
        )
    return tuple(out)


def ngt_from_row(row: t.NodeGroupTemplateRow | CoreRow) -> m.NodeGroupTemplate:
    return m.NodeGroupTemplate(
        id=row.id,
        uuid=row.uuid,
        project_id=row.project_id,
        name=row.name,
        spec=ng_spec_from_json(row.spec),
        cluster_template_id=row.cluster_template_uuid,
        source_id=row.source_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def ct_entry_from_row(row: t.NodeGroupTemplateRow) -> m.TemplateEntry:
    """An entry of a cluster template: embedded NGT, or a reference (whose `spec`
    column holds only the attributes over the referenced NGT)."""
    if row.reference_uuid is None:
        return ngt_from_row(row)
    return m.NodeGroupTemplateRef(
        id=row.id,
        uuid=row.uuid,
        project_id=row.project_id,
        name=row.name,
        nodegroup_template_id=row.reference_uuid,
        overrides=dict(row.spec or {}),
        cluster_template_id=row.cluster_template_uuid,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def ct_from_row(
    row: t.ClusterTemplateRow | CoreRow, ngts: list[t.NodeGroupTemplateRow] | None = None
) -> m.ClusterTemplate:
    return m.ClusterTemplate(
        id=row.id,
        uuid=row.uuid,
        project_id=row.project_id,
        user_id=row.user_id,
        name=row.name,
        attrs=dict(row.attrs or {}),
        node_group_templates=tuple(ct_entry_from_row(n) for n in ngts or ()),
        source_id=row.source_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def cluster_from_row(row: t.ClusterRow | CoreRow) -> m.Cluster:
    return m.Cluster(
        id=row.id,
        uuid=row.uuid,
        project_id=row.project_id,
        user_id=row.user_id,
        name=row.name,
        attrs=dict(row.attrs or {}),
        cluster_template_id=row.cluster_template_id,
        source_id=row.source_id,
        generation=row.generation,
        observed_generation=row.observed_generation,
        status=row.status,
        status_reason=row.status_reason,
        health_status=row.health_status,
        health_status_reason=dict(row.health_status_reason or {}),
        api_address=row.api_address,
        conditions=conditions_from_json(row.conditions),
        deleting=row.deleting,
        created_at=row.created_at,
        updated_at=row.updated_at,
        providers=None if row.providers is None else tuple(row.providers),
    )


def cluster_ref_from_row(row: t.ClusterRow) -> ClusterRef:
    return ClusterRef(
        uuid=row.uuid,
        name=row.name,
        project_id=row.project_id,
        attrs=dict(row.attrs or {}),
        cluster_template_id=row.cluster_template_id,
        deleting=row.deleting,
        health_status=row.health_status,
        health_status_reason=dict(row.health_status_reason or {}),
        providers=None if row.providers is None else tuple(row.providers),
    )


def template_ref_from_row(row: t.ClusterTemplateRow) -> TemplateRef:
    return TemplateRef(
        uuid=row.uuid, name=row.name, project_id=row.project_id, attrs=dict(row.attrs or {})
    )


def nodegroup_from_row(row: t.NodeGroupRow | CoreRow) -> m.NodeGroup:
    return m.NodeGroup(
        id=row.id,
        uuid=row.uuid,
        cluster_id=row.cluster_uuid,
        project_id=row.project_id,
        name=row.name,
        is_default=row.is_default,
        spec=ng_spec_from_json(
            {**row.spec, "role": row.role, "provider": row.provider},
            (row.node_count, row.min_node_count, row.max_node_count),
        ),
        generation=row.generation,
        observed_generation=row.observed_generation,
        status=row.status,
        status_reason=row.status_reason,
        conditions=conditions_from_json(row.conditions),
        deleting=row.deleting,
        source_id=row.source_id,
        version=row.version,
        created_at=row.created_at,
        updated_at=row.updated_at,
        provider_ref=getattr(row, "provider_ref", None),
    )


def node_from_row(row: t.NodeRow | CoreRow) -> m.Node:
    return m.Node(
        id=row.id,
        uuid=row.uuid,
        name=row.name,
        cluster_id=row.cluster_uuid,
        nodegroup_id=row.nodegroup_uuid,
        project_id=row.project_id,
        state=m.NodeState(row.state),
        availability_zone=row.availability_zone,
        address=row.address,
        provider_id=row.provider_id,
        image_id=row.image_id,
        flavor_id=row.flavor_id,
        reason=row.reason,
        to_delete=row.to_delete,
        created_at=row.created_at,
        ready_at=row.ready_at,
        updated_at=row.updated_at,
        revision=row.revision,
        building_at=row.building_at,
        agent_seen_at=row.agent_seen_at,
        repair_step=row.repair_step or 0,
        repair_at=row.repair_at,
        vm_slot=row.vm_slot,
        provider_index=row.provider_index,
    )


def event_from_row(row: t.EventRow) -> m.Event:
    return m.Event(
        id=row.id,
        cluster_id=row.cluster_uuid,
        time=row.time,
        type=row.type,
        reason=row.reason,
        message=row.message,
        nodegroup_id=row.nodegroup_uuid,
        node_id=row.node_uuid,
    )


def operation_from_row(row: t.OperationRow | CoreRow) -> m.Operation:
    return m.Operation(
        id=row.id,
        uuid=row.uuid,
        cluster_id=row.cluster_uuid,
        nodegroup_id=row.nodegroup_uuid,
        kind=row.kind,
        params=dict(row.params or {}),
        nodes=tuple(row.nodes or ()),
        batch_size=row.batch_size,
        state=row.state,
        message=row.message,
        created_at=row.created_at,
        finished_at=row.finished_at,
    )


def task_from_row(row: t.NodeTaskRow | CoreRow) -> m.NodeTask:
    return m.NodeTask(
        id=row.id,
        uuid=row.uuid,
        operation_id=row.operation_uuid,
        node_id=row.node_uuid,
        kind=row.kind,
        params=dict(row.params or {}),
        state=row.state,
        output=row.output,
        exit_code=row.exit_code,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )
