"""Read models the API serializes: a resource plus what is derived from other rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from shoal.db.repo.clusters import Counts
from shoal.db.repo.nodegroups import Live
from shoal.domain import model as m


@dataclass(frozen=True)
class GroupView:
    group: m.NodeGroup
    live: Live = field(default_factory=Live)
    node_addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterView:
    cluster: m.Cluster
    counts: Counts = field(default_factory=Counts)
    node_addresses: tuple[str, ...] = ()
    master_addresses: tuple[str, ...] = ()
    groups: tuple[GroupView, ...] = ()
