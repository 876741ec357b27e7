"""The kinds of work a conductor does, registered once: each names its queue (the
table and lease prefix, `db.queue`), how a worker claims it, and the reconciler
that runs a pass over a claimed batch. The loop, the claims, the heartbeat and
the error backoff iterate over this list; a new kind of work is one entry here."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shoal.conductor import cluster
from shoal.conductor.context import Context
from shoal.conductor.nodegroup import reconcile as nodegroup
from shoal.db import queue
from shoal.db.engine import Database

Batch = list[str]  # resources of one kind that one pass takes together


class Claim(Protocol):
    """How a worker claims due work of one kind: batches of resources, one pass each."""

    def __call__(
        self,
        db: Database,
        holder: str,
        now: datetime,
        ttl: float,
        limit: int,
        *,
        release: Collection[str] = (),
        merge: bool = False,
        looked: bool = False,
        seen: queue.Seen | None = None,
    ) -> list[Batch]: ...


def each_alone(kind: queue.Kind) -> Claim:
    """Claim resources of `kind` one pass each (all in one pass when merging)."""

    def claim(
        db: Database,
        holder: str,
        now: datetime,
        ttl: float,
        limit: int,
        *,
        release: Collection[str] = (),
        merge: bool = False,
        looked: bool = False,
        seen: queue.Seen | None = None,
    ) -> list[Batch]:
        uuids = queue.claim_due(
            db, kind, holder, now, ttl, limit, release=release, looked=looked, seen=seen
        )
        return [uuids] if merge and uuids else [[u] for u in uuids]

    return claim


@dataclass(frozen=True)
class WorkKind:
    """One kind of work: its queue, its claim and its reconciler."""

    queue: queue.Kind
    claim: Claim
    reconcile: Callable[[Context, Batch], None]

    @property
    def name(self) -> str:
        return self.queue.name


# In the order a worker looks for work: node groups (machines) before clusters
# (facts aggregated from the groups).
KINDS: tuple[WorkKind, ...] = (
    WorkKind(queue.NODEGROUP, queue.claim_due_groups, nodegroup.reconcile_batch),
    WorkKind(queue.CLUSTER, each_alone(queue.CLUSTER), cluster.reconcile_batch),
)
