"""Resize (with targeted removal) and upgrade: the service resolves which nodes go.

`nodes_to_remove` entries (node uuid, provider id = Nova server id, node name,
address, or an integer: a Heat member index in a heat-provider group, else the
position in the group's nodes by creation; `node_named`) become `to_delete`
marks in the same transaction that sets the new count; the conductor deletes
exactly those and never another one in their place.
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from datetime import datetime
from typing import Any

from shoal.db import events
from shoal.db.engine import Database
from shoal.db.records import ClusterRef, Session
from shoal.db.repo import clusters, nodegroups, nodes, templates
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain import policy
from shoal.domain import validation as v
from shoal.domain.bootstrap import versions
from shoal.domain.errors import Conflict, Invalid, NotFound, Unsupported
from shoal.services import virt
from shoal.services.context import Caller

RESIZE_KEYS = frozenset({"node_count", "nodes_to_remove", "nodegroup", "force"})
UPGRADE_KEYS = frozenset({"cluster_template", "max_batch_size", "nodegroup"})


def default_group(s: Session, cluster: ClusterRef, *, master: bool = False) -> m.NodeGroup:
    """The cluster's default worker (or master) group, locked."""
    for g in nodegroups.of_cluster(s, cluster.uuid):
        if g.is_default and (g.spec.role == m.ROLE_MASTER) == master and not g.deleting:
            return nodegroups.find(s, cluster.uuid, g.uuid, for_update=True)
    raise NotFound("NodeGroup", m.DEFAULT_MASTER_GROUP if master else m.DEFAULT_WORKER_GROUP)


def _group(s: Session, cluster: ClusterRef, ident: Any) -> m.NodeGroup:
    if ident is None:
        return default_group(s, cluster)
    if isinstance(ident, int) and not isinstance(ident, bool):
        ident = str(ident)
    return nodegroups.find(s, cluster.uuid, v.string("nodegroup", ident) or "", for_update=True)


def node_named(group_nodes: list[m.Node], entry: str) -> m.Node | None:
    """The node of a group that `entry` names, by the first rule that matches:

    1. its shoal uuid, its provider id (a Nova server id), its name or its address;
    2. a uuid in another spelling (upper case, no dashes: a Kubernetes node's
       systemUUID, which the cluster-autoscaler sends): its uuid or provider id;
    3. an integer: in a group whose provider realises it whole (the heat provider,
       its nodes carry `provider_index`), the node with that member index (its name
       in the stack's `kube_minions`, its key in `refs_map`); in any other group, the
       node at that position in the group's nodes by creation;
    none: None."""
    return _Names(group_nodes).find(entry)


class _Names:
    """A group's nodes by every name `node_named` accepts, indexed once for all the
    entries of a request (not a scan of the group per entry)."""

    def __init__(self, group_nodes: list[m.Node]) -> None:
        self.nodes = group_nodes
        self.keys: dict[str, m.Node] = {}
        self.ids: dict[str, m.Node] = {}
        for n in group_nodes:
            for k in (n.uuid, n.provider_id, n.name, n.address):
                if k:
                    self.keys.setdefault(k, n)
            for k in (n.uuid, n.provider_id):
                if k:
                    self.ids.setdefault(k, n)
        self.members = {n.provider_index: n for n in group_nodes if n.provider_index is not None}

    def find(self, entry: str) -> m.Node | None:
        entry = entry.strip()
        if entry in self.keys:
            return self.keys[entry]
        spelled = _uuid_of(entry)
        if spelled is not None and spelled in self.ids:
            return self.ids[spelled]
        index = v.decimal_id(entry)
        if index is None:
            return None
        if self.members:
            return self.members.get(str(index))
        return self.nodes[index] if index < len(self.nodes) else None


def _uuid_of(entry: str) -> str | None:
    """`entry` as a canonical uuid (lower case, dashed), when it is one."""
    try:
        return str(uuidlib.UUID(entry))
    except ValueError:
        return None


def match_nodes(
    group_nodes: list[m.Node], entries: list[str], field: str = "nodes_to_remove"
) -> list[m.Node]:
    """The nodes named by `entries` (node_named's rule); Invalid naming `field` and the
    first entry that names none."""
    names = _Names(group_nodes)
    out: dict[str, m.Node] = {}
    for e in entries:
        node = names.find(e)
        if node is None:
            raise Invalid(
                f"{field}: {e!r} is not a node of this node group (give a node's uuid, "
                "Nova server id, name or address, or its member index in the group)",
                field,
            )
        out[node.uuid] = node
    return list(out.values())


def _entries(raw: Any, limits: v.Limits) -> list[str]:
    """`nodes_to_remove` as strings: at most a group's worth of entries (one per node
    the per-group limit allows), each at most NODE_REF_MAX characters."""
    raw = v.literal(raw) or []
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(x, str | int) for x in raw):
        raise Invalid("nodes_to_remove must be a list of strings", "nodes_to_remove")
    v.bounded_list("nodes_to_remove", raw, limits.nodes_per_group)
    entries = [str(x) for x in raw]
    if any(len(e) > v.NODE_REF_MAX for e in entries):
        raise Invalid(
            f"nodes_to_remove entries must be at most {v.NODE_REF_MAX} characters",
            "nodes_to_remove",
        )
    return entries


def resize(
    s: Session,
    caller: Caller,
    cluster: ClusterRef,
    body: dict[str, Any],
    now: datetime,
    *,
    field: str = "node_count",
) -> m.NodeGroup:
    """Set a group's count, marking named nodes for removal, in the caller's transaction.

    A count above the operator's node limits is refused only when it grows: a
    group or cluster already past a limit that was lowered can still shrink."""
    v.reject_unknown("resize", body, RESIZE_KEYS)
    if "node_count" not in body:
        raise Invalid("node_count is required", "node_count")
    lowest = 0 if caller.at_least(1, 10) else 1
    count = v.integer(field, body["node_count"], lo=lowest)
    entries = _entries(body.get("nodes_to_remove"), caller.limits)
    group = _group(s, cluster, body.get("nodegroup"))
    if group.deleting:
        raise Conflict(f"NodeGroup {group.name} is being deleted")
    spec = group.spec
    others = [
        g for g in nodegroups.of_cluster(s, cluster.uuid) if not g.deleting and g.uuid != group.uuid
    ]
    if count > spec.node_count:
        v.group_nodes(field, count, caller.limits)
        v.cluster_nodes(sum(g.spec.node_count for g in others) + count, caller.limits, field)
    other_masters = 0
    if spec.role == m.ROLE_MASTER:
        other_masters = sum(g.spec.node_count for g in others if g.spec.role == m.ROLE_MASTER)
        v.master_total(other_masters + count)
    if count < spec.min_node_count or (
        spec.max_node_count is not None and count > spec.max_node_count
    ):
        hi = "unbounded" if spec.max_node_count is None else str(spec.max_node_count)
        raise Conflict(
            f"Resizing {group.name} outside the allowed range: min_node_count = "
            f"{spec.min_node_count}, max_node_count = {hi}, node_count = {count}"
        )
    group_nodes = nodes.of_group(s, group.uuid) if entries or spec.role == m.ROLE_VIRT else []
    doomed = match_nodes(group_nodes, entries)
    if spec.role == m.ROLE_VIRT:  # hosts carrying VMs go only when forced
        force = v.boolean("force", body.get("force", False))
        going = virt.going_on_shrink(group_nodes, doomed, count, spec.deletion_policy)
        virt.refuse_taking_down(s, cluster.uuid, group.name, going, force, "this resize")
    if spec.role == m.ROLE_MASTER and doomed and not other_masters:
        kept = {n.uuid for n in group_nodes if not n.to_delete} - {n.uuid for n in doomed}
        if not kept:
            raise Invalid(
                "cannot remove every master of a cluster: keep at least one running "
                "while its replacements boot",
                "nodes_to_remove",
            )
    nodes.mark_to_delete(s, [n.uuid for n in doomed])
    resized = nodegroups.write_spec(
        s, group.uuid, dataclasses.replace(spec, node_count=count), "UPDATE_IN_PROGRESS", now
    )
    clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
    removed = f", removing {', '.join(n.name for n in doomed)}" if doomed else ""
    events.record(
        s,
        cluster.uuid,
        "ResizeRequested",
        f"node group {group.name}: node_count {spec.node_count} -> {count}{removed}",
        nodegroup_uuid=group.uuid,
    )
    return resized


def resize_cluster(db: Database, caller: Caller, ident: str, body: dict[str, Any]) -> str:
    """POST /actions/resize; returns the cluster uuid."""
    policy.enforce(caller, "cluster:resize")
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, ident)
        resize(s, caller, cluster, body, utcnow())
        return cluster.uuid


def upgrade_cluster(db: Database, caller: Caller, ident: str, body: dict[str, Any]) -> str:
    """Move node groups to the image and COE version of another template (a rollout)."""
    policy.enforce(caller, "cluster:upgrade")
    if caller.version == (1, 7):
        raise Unsupported("upgrade is not supported at API microversion 1.7", "version")
    v.reject_unknown("upgrade", body, UPGRADE_KEYS)
    target = v.required_id(
        "cluster_template", body.get("cluster_template"), "the template to move to"
    )
    batch = v.integer("max_batch_size", body.get("max_batch_size", 1), lo=1)
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, ident)
        ct = templates.get_ct(s, caller.scope, target)
        image = ct.attrs.get("image_id")
        version = v.version(
            f"the version of cluster template {ct.name} (coe_version or label kube_tag)",
            ct.attrs.get("coe_version") or (ct.attrs.get("labels") or {}).get("kube_tag"),
        )
        versions.resolve(version, f"the version of cluster template {ct.name}")
        now = utcnow()
        groups = (
            [_group(s, cluster, body["nodegroup"])]
            if body.get("nodegroup") is not None
            else [
                nodegroups.find(s, cluster.uuid, g.uuid, for_update=True)
                for g in nodegroups.of_cluster(s, cluster.uuid)
                if not g.deleting
            ]
        )
        _check_skew(s, cluster, groups, version)
        for group in groups:
            spec = group.spec
            # Magnum's max_batch_size: how many nodes of a group may be down at once
            # (masters go one at a time whatever it says); a new upgrade lifts any hold.
            rollout = dataclasses.replace(spec.rollout, max_unavailable=batch)
            new = dataclasses.replace(
                spec,
                image_id=image or spec.image_id,
                coe_version=version or spec.coe_version,
                rollout=rollout,
                rollout_hold=None,
            )
            nodegroups.write_spec(s, group.uuid, new, "UPDATE_IN_PROGRESS", now)
        attrs = dict(cluster.attrs)
        if image:
            attrs["image_id"] = image
        if version:
            attrs["coe_version"] = version
        clusters.touch(
            s, cluster.uuid, "UPDATE_IN_PROGRESS", now, attrs=attrs, cluster_template_id=ct.uuid
        )
        events.record(
            s,
            cluster.uuid,
            "UpgradeRequested",
            f"upgrade to template {ct.name} (image {image}, version {version}) of "
            f"{', '.join(g.name for g in groups)}; max_batch_size {batch}",
        )
        return cluster.uuid


def _check_skew(
    s: Session, cluster: ClusterRef, groups: list[m.NodeGroup], version: str | None
) -> None:
    """Refuse (Invalid) an upgrade that would leave workers on a Kubernetes version the
    masters cannot serve (newer than them, or too far behind): masters go first."""
    if not version:
        return
    moving = {g.uuid for g in groups}
    cluster_version = cluster.attrs.get("coe_version")
    masters: list[tuple[str, str]] = []
    workers: list[tuple[str, str]] = []
    for g in nodegroups.of_cluster(s, cluster.uuid):
        if g.deleting:
            continue
        current = g.spec.coe_version or cluster_version
        at = version if g.uuid in moving else current
        if at and versions.parses(str(at)):  # (a legacy label is not held to the rule)
            (masters if g.spec.role == m.ROLE_MASTER else workers).append((g.name, str(at)))
    for name, at in workers:
        problem = versions.skew_problem([t for _, t in masters], at)
        if problem is not None:
            raise Invalid(f"node group {name}: {problem}", "nodegroup")
