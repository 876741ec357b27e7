"""Clusters' delegations as the conductor reads them: a Keystone trust from the user
who created the cluster, sealed in the database, handed to the drivers that act in
users' projects, and removed from Keystone when the cluster is deleted."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping

from shoal.db import credentials
from shoal.db.engine import Database
from shoal.domain import sealing
from shoal.drivers.contract import Delegation

CACHE_MAX = 100_000


class StoredDelegations:
    """`Delegations` over the database. A cluster's credential is written with the
    cluster and never changes, so each is read once (absence too: a cluster made
    without one never gets one)."""

    def __init__(
        self,
        db: Database,
        sealer: Callable[[], sealing.Sealer],
        remove: Callable[[Mapping[str, str]], None] | None = None,
    ) -> None:
        self.db = db
        self._sealer = sealer
        self._remove = remove
        self._known: dict[str, Delegation | None] = {}
        self._lock = threading.Lock()

    def of(self, cluster_id: str) -> Delegation | None:
        with self._lock:
            if cluster_id in self._known:
                return self._known[cluster_id]
        found = credentials.sealed_of(self.db, cluster_id)
        made = None
        if found is not None:
            kind, sealed = found
            made = Delegation(kind, json.loads(self._sealer().open(sealed)))
        with self._lock:
            if len(self._known) >= CACHE_MAX:
                self._known.clear()
            self._known[cluster_id] = made
        return made

    def forget(self, cluster_id: str) -> None:
        """Remove the cluster's delegation where it was made (Keystone), before its row
        goes with the cluster; raises (shoal.domain.errors.Unavailable) when that cannot
        be done now, so the cluster's deletion waits and tries again."""
        found = self.of(cluster_id)
        if found is not None and self._remove is not None:
            self._remove({"kind": found.kind, **found.values})
        with self._lock:
            self._known.pop(cluster_id, None)
