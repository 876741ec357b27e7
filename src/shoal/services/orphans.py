"""The machines the sweeper holds, as admins see and act on them: the list (with the
cluster, node group and node each claims from its tags), a deletion an admin asks
for (the next sweep carries it out), and the adoption of a cluster a restored
database lost, rebuilt from its machines (domain/adoption.py): its rows are made
with the ids the machines carry, and each group's pass then adopts its machines
(none made, none deleted)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shoal.db import events, orphans
from shoal.db.engine import Database, xact_lock
from shoal.db.orphans import Held
from shoal.db.records import ClusterRef, Session
from shoal.db.repo import clusters, nodegroups
from shoal.db.types import utcnow
from shoal.domain import adoption, merge, policy
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid, NotFound
from shoal.services.context import Caller

ADOPT_KEYS = frozenset({"cluster_id", "name"})
HELD, ASKED, SWEPT = "held", "delete requested", "group deleted by shoal"


@dataclass(frozen=True)
class OrphanView:
    """A held machine with the names it claims (derived from its node name, as adoption
    would name them) and what the sweeper will do with it."""

    held: Held
    cluster_name: str | None
    nodegroup_name: str | None
    fate: str  # HELD, ASKED or SWEPT


def _found(h: Held) -> adoption.Found:
    s = h.seen
    return adoption.Found(
        s.name,
        s.nodegroup_uuid or "",
        s.role,
        s.flavor_id,
        s.image_id,
        s.provider,
        s.project_id or "",
    )


def list_all(db: Database, caller: Caller) -> list[OrphanView]:
    """Every held machine, oldest sighting first (admins)."""
    policy.enforce(caller, "orphan:get_all")
    held = orphans.held(db)
    claimed = {c for h in held for c in (h.seen.cluster_uuid, h.seen.nodegroup_uuid) if c}
    dead = orphans.buried(db, claimed)
    names: dict[str, tuple[str, dict[str, str]]] = {}
    for cid in {h.seen.cluster_uuid or "" for h in held}:
        mine = [h for h in held if (h.seen.cluster_uuid or "") == cid]
        cluster, groups = adoption.groups_of([_found(h) for h in mine])
        names[cid] = cluster, {g.uuid: g.name for g in groups}
    out = []
    for h in held:
        cluster, group_names = names[h.seen.cluster_uuid or ""]
        gone = {h.seen.cluster_uuid, h.seen.nodegroup_uuid} & dead
        fate = ASKED if h.delete_requested_at else SWEPT if gone else HELD
        group = group_names.get(h.seen.nodegroup_uuid or "")
        out.append(OrphanView(h, cluster or None, group, fate))
    return out


def request_delete(db: Database, caller: Caller, machine_ids: Sequence[str]) -> list[Held]:
    """Have the next sweep delete these held machines (all, or none when one of them is
    not held: NotFound naming it)."""
    policy.enforce(caller, "orphan:delete")
    if not machine_ids:
        raise Invalid("name at least one machine id (see shoal orphan list)", "machine_id")
    marked, missing = orphans.request_delete(db, machine_ids, caller.user_id, utcnow())
    if missing:
        raise NotFound("held machine", ", ".join(missing))
    return marked


def adopt(db: Database, caller: Caller, body: Mapping[str, Any]) -> m.Cluster:
    """Make cluster `cluster_id` again from the held machines that claim it: its node
    groups by their tags (ids, role) and their machines' flavor and image, one node per
    machine (each group's pass adopts them). `name`: the cluster's (default: derived
    from the node names). A cluster the database knows gets back the groups it lost."""
    policy.enforce(caller, "orphan:adopt")
    v.reject_unknown("orphan adopt", body, ADOPT_KEYS)
    ident = v.required_id("cluster_id", body.get("cluster_id"), "see shoal orphan list")
    name = body.get("name")
    given = None if name is None else v.name("name", name, v.CLUSTER_NAME_MAX)
    held = [h for h in orphans.held(db, ident) if h.delete_requested_at is None]
    if not held or not all(h.seen.nodegroup_uuid for h in held):
        raise NotFound("held machine of cluster", ident)
    dead = orphans.buried(db, {ident} | {h.seen.nodegroup_uuid or "" for h in held})
    if dead:
        raise Conflict(
            f"shoal deleted cluster {ident} or its node groups ({', '.join(sorted(dead))}): "
            "its machines are swept, not adopted"
        )
    projects = {h.seen.project_id for h in held}
    if len(projects) != 1 or not next(iter(projects)):
        raise Conflict(
            f"the machines of cluster {ident} claim projects {sorted(map(str, projects))}: "
            "one project is needed to adopt them"
        )
    project = str(next(iter(projects)))
    with db.write() as s:
        xact_lock(s, f"adopt:{ident}")  # two admins adopting it at once: one wins, one 409
        known = clusters.by_uuid(s, ident)
        derived, groups = adoption.groups_of(
            [_found(h) for h in held], known.name if known is not None else given
        )
        hosts = [g.name for g in groups if g.role == m.ROLE_VIRT]
        if hosts:
            raise Conflict(
                f"cluster {ident} has virt hosts ({', '.join(hosts)}): their VM slots are "
                "not in the machines' tags, so they cannot be adopted; import the cluster "
                "from an export (shoal import) or delete its machines (shoal orphan delete)"
            )
        if nodegroups.any_exists(s, {g.uuid for g in groups}):
            raise Conflict(f"a node group the machines of cluster {ident} claim exists already")
        if known is None:
            cluster = _new_cluster(s, caller, ident, given or derived, project, groups)
            what = f"cluster {cluster.name} adopted"
        else:
            cluster = _into(s, known, groups, project)
            what = f"node groups of cluster {known.name} adopted"
        orphans.forget(s.connection(), [h.seen.machine_id for h in held])
        events.record(
            s,
            ident,
            "Adopted",
            f"{what} from {len(held)} machine(s) the sweeper held: "
            + ", ".join(f"{g.name} ({g.role} x{g.node_count} on {g.provider})" for g in groups),
        )
    return cluster


def _new_cluster(
    s: Session, caller: Caller, ident: str, name: str, project_id: str, groups: list[adoption.Group]
) -> m.Cluster:
    """The cluster's row and its groups', with the machines' ids."""
    masters = [g for g in groups if g.role == m.ROLE_MASTER]
    others = [g for g in groups if g.role != m.ROLE_MASTER]
    request = {
        "image_id": (masters or others)[0].image_id,
        "flavor_id": (others or masters)[0].flavor_id,
        "master_flavor_id": masters[0].flavor_id if masters else None,
    }
    return clusters.insert(
        s,
        project_id=project_id,
        user_id=caller.user_id,
        name=name or f"adopted-{ident[:8]}",
        attrs=merge.cluster_attrs(None, {k: x for k, x in request.items() if x}),
        groups=merge.mark_defaults([_plan(g) for g in groups]),
        cluster_template_id=None,
        source_id=None,
        uuid=ident,
        group_uuids={g.name: g.uuid for g in groups},
    )


def _into(
    s: Session, cluster: ClusterRef, groups: list[adoption.Group], project_id: str
) -> m.Cluster:
    """The lost groups added to the cluster the database knows (a name it has taken
    gets a suffix); the cluster updates, as for a group created through the API."""
    if cluster.deleting:
        raise Conflict(f"cluster {cluster.uuid} is being deleted: its lost groups are not adopted")
    if project_id != cluster.project_id:
        raise Conflict(
            f"the held machines claim project {project_id}, cluster {cluster.uuid} is in "
            f"{cluster.project_id}: they are not adopted"
        )
    taken = nodegroups.names_in(s, cluster.uuid)
    plans = []
    for g in groups:
        name, n = g.name, 1
        while name in taken:
            n += 1
            name = f"{g.name}-{n}"
        taken.add(name)
        plans.append(_plan(dataclasses.replace(g, name=name)))
    now = utcnow()
    uuids = {p.name: g.uuid for p, g in zip(plans, groups, strict=True)}
    nodegroups.insert(s, cluster, plans, now=now, uuids=uuids)
    clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
    return clusters.get_by_uuid(s, cluster.uuid)


def _plan(g: adoption.Group) -> merge.GroupPlan:
    spec = m.NodeGroupSpec(
        role=g.role,
        flavor_id=g.flavor_id,
        image_id=g.image_id,
        node_count=g.node_count,
        min_node_count=0,
        provider=g.provider,
    )
    return merge.GroupPlan(g.name, spec)


def age(h: Held, now: datetime) -> float:
    """Seconds since the sweeper first saw the machine held."""
    return max(0.0, (now - h.first_seen).total_seconds())
