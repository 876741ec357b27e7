"""What a pass of a node group on a hosted provider (VMs on virt hosts) reads about
its cluster's virt hosts, in one snapshot: the ready hosts, the VM slots their
groups offer, and which slots nodes hold (`domain/virt.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import bindparam, func, select

from shoal.db import convert
from shoal.db.engine import Database
from shoal.db.tables import NodeGroupRow, NodeRow, table_of
from shoal.domain import model as m
from shoal.domain import virt

_NG, _NODE = table_of(NodeGroupRow), table_of(NodeRow)
_CLUSTER_OF = select(_NG.c.cluster_uuid).where(_NG.c.uuid == bindparam("uuid"))
_VIRT_GROUPS = (
    select(*_NG.c)
    .where(_NG.c.cluster_uuid == bindparam("cluster"), _NG.c.role == m.ROLE_VIRT)
    .order_by(_NG.c.id)
)
_HOSTS = (
    select(_NODE.c.uuid, _NODE.c.name, _NODE.c.nodegroup_uuid, _NODE.c.state, _NODE.c.address)
    .where(_NODE.c.nodegroup_uuid.in_(bindparam("groups", expanding=True)))
    .where(_NODE.c.state != m.NodeState.DELETING.value, _NODE.c.to_delete.is_(False))
    .order_by(_NODE.c.id)
)
_READY = (
    select(_NG.c.cluster_uuid, _NODE.c.name, _NODE.c.uuid, _NG.c.provider, _NODE.c.address)
    .join(_NG, _NG.c.uuid == _NODE.c.nodegroup_uuid)
    .where(_NG.c.role == m.ROLE_VIRT, _NODE.c.state == m.NodeState.ACTIVE.value)
    .where(_NODE.c.to_delete.is_(False))
    .order_by(_NODE.c.id)
)
_VM_NODES_LEFT = select(func.count()).where(
    _NODE.c.cluster_uuid == bindparam("cluster"), _NODE.c.vm_slot.is_not(None)
)
_TAKEN = select(
    _NODE.c.vm_slot, _NODE.c.uuid, _NODE.c.name, _NODE.c.nodegroup_uuid, _NODE.c.availability_zone
).where(_NODE.c.cluster_uuid == bindparam("cluster"), _NODE.c.vm_slot.is_not(None))


@dataclass(frozen=True)
class Taken:
    """A node holding a slot: its uuid, name, group and host (zone)."""

    node_uuid: str
    name: str
    nodegroup_uuid: str
    host: str | None


@dataclass(frozen=True)
class VirtView:
    cluster_uuid: str
    hosts: tuple[virt.Host, ...] = ()  # ready hosts, each group's oldest first
    booting: int = 0  # hosts on their way (made, not ready yet)
    slots: tuple[virt.Slot, ...] = ()
    taken: Mapping[str, Taken] = field(default_factory=dict)  # slot key -> holder
    templates: Mapping[str, str | None] = field(default_factory=dict)  # virt group uuid ->
    groups: Mapping[str, str] = field(default_factory=dict)  # virt group uuid -> name
    providers: Mapping[str, str | None] = field(default_factory=dict)  # virt group -> its

    def slot(self, key: str | None) -> virt.Slot | None:
        return next((s for s in self.slots if s.key == key), None) if key else None


def load(db: Database, group_uuid: str) -> VirtView | None:
    """The virt hosts of the cluster of node group `group_uuid` (None: no such group)."""
    with db.core_read(snapshot=True) as s:
        cluster = s.scalar(_CLUSTER_OF, {"uuid": group_uuid})
        if cluster is None:
            return None
        groups = [
            convert.nodegroup_from_row(r) for r in s.execute(_VIRT_GROUPS, {"cluster": cluster})
        ]
        # Hosts of every virt group, one being deleted too (its VMs are deleted before
        # it: they must still be found); slots only of the groups that stay.
        live = [g for g in groups if not g.deleting]
        hosts: list[virt.Host] = []
        booting = 0
        index: dict[str, int] = {}
        every = {"groups": [g.uuid for g in groups]}
        for uid, name, gid, state, address in s.execute(_HOSTS, every):
            i = index.get(gid, 0)
            index[gid] = i + 1
            if state == m.NodeState.ACTIVE.value:
                hosts.append(virt.Host(uid, name, gid, i, address))
            elif state in (m.NodeState.PENDING.value, m.NodeState.BUILDING.value):
                booting += 1
        taken = {
            key: Taken(uid, name, gid, az)
            for key, uid, name, gid, az in s.execute(_TAKEN, {"cluster": cluster})
        }
    slots = [sl for g in live for sl in virt.slots(g.uuid, g.spec.vms)]
    return VirtView(
        cluster_uuid=cluster,
        hosts=tuple(hosts),
        booting=booting,
        slots=tuple(slots),
        taken=taken,
        templates={g.uuid: g.spec.vm_template for g in live},
        groups={g.uuid: g.name for g in groups},
        providers={g.uuid: g.spec.provider for g in groups},
    )


def vm_nodes_left(db: Database, cluster_uuid: str) -> int:
    """How many nodes of the cluster are VMs of virt hosts (rows not dropped yet)."""
    with db.core_read() as s:
        return int(s.scalar(_VM_NODES_LEFT, {"cluster": cluster_uuid}) or 0)


@dataclass(frozen=True)
class ReadyHost:
    """A ready virt host: its cluster, name, node, its group's provider, address."""

    cluster_uuid: str
    name: str
    node_uuid: str
    provider: str | None
    address: str | None


def ready(db: Database, cluster_uuid: str | None = None) -> list[ReadyHost]:
    """The ready hosts of the virt groups of cluster `cluster_uuid` (of every cluster
    when None), oldest first."""
    query = _READY if cluster_uuid is None else _READY.where(_NG.c.cluster_uuid == cluster_uuid)
    with db.core_read() as s:
        return [
            ReadyHost(cluster, name, uid, provider, address)
            for cluster, name, uid, provider, address in s.execute(query)
        ]
