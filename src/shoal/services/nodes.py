"""A cluster's nodes and its event history, as its readers see them."""

from __future__ import annotations

from shoal.db import events
from shoal.db.engine import Database
from shoal.db.repo import clusters, nodegroups, nodes
from shoal.db.repo.paging import Page
from shoal.domain import model as m
from shoal.domain import policy
from shoal.services.context import Caller


def list_nodes(
    db: Database, caller: Caller, cluster_ident: str, page: Page, nodegroup: str | None
) -> list[tuple[m.Node, str, str]]:
    policy.enforce(caller, "cluster:get")
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        ng_uuid = nodegroups.find(s, cluster.uuid, nodegroup).uuid if nodegroup else None
        return nodes.list_page(s, cluster.uuid, page, ng_uuid)


def list_events(
    db: Database, caller: Caller, cluster_ident: str, after: int, limit: int
) -> list[m.Event]:
    policy.enforce(caller, "cluster:get")
    with db.read() as s:
        cluster = clusters.find(s, caller.scope, cluster_ident)
        return events.list_for_cluster(s, cluster.uuid, after_id=after, limit=limit)
