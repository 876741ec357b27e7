"""The virt hosts as hosted drivers see them (`contract.VirtHosts`): the ready hosts
of every cluster, read from the database each time, so that no process keeps its
own idea of which clusters have which hosts (any process's sweeper sees every VM)."""

from __future__ import annotations

from collections.abc import Sequence

from shoal.db import virthosts
from shoal.db.engine import Database
from shoal.drivers.contract import TransientError, VirtHost


class StoredVirtHosts:
    """`VirtHosts` over shoal's database; `default_provider`: the provider of a virt
    group that names none."""

    def __init__(self, db: Database, default_provider: str) -> None:
        self.db = db
        self.default_provider = default_provider

    def ready(self, cluster_id: str | None = None) -> Sequence[VirtHost]:
        try:
            found = virthosts.ready(self.db, cluster_id)
        except Exception as exc:  # the database is away: the driver's call is retried
            raise TransientError(f"cannot read the virt hosts: {exc}") from exc
        return [
            VirtHost(h.name, h.node_uuid, h.provider or self.default_provider, h.address)
            for h in found
        ]
