"""The fleet at a glance: Magnum's stats (clusters and nodes) and mservices (the
conductors, each up or down)."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.db.engine import Database
from shoal.db.repo import fleet
from shoal.db.types import utcnow
from shoal.domain import fleet as rules
from shoal.domain import policy
from shoal.services.context import Caller


@dataclass(frozen=True)
class ServiceInfo:
    conductor: rules.Conductor
    state: str


def stats(db: Database, caller: Caller) -> dict[str, int]:
    """Magnum's stats: clusters and nodes (sum of desired counts) of the project, or
    of every project (an admin's `all_tenants`)."""
    policy.enforce(caller, "stats:get")
    with db.read() as s:
        n_clusters, n_nodes = fleet.counts(s, caller.scope)
    return {"clusters": n_clusters, "nodes": n_nodes}


def mservices(db: Database, caller: Caller) -> list[ServiceInfo]:
    """Conductors; `up` while within the three heartbeats each recorded with its last
    report (its own period: no setting of this process is assumed)."""
    policy.enforce(caller, "mservice:get_all")
    now = utcnow()
    with db.read() as s:
        found = fleet.conductors(s)
    return [ServiceInfo(c, rules.state(c.up_until, now)) for c in found]
