"""The work queue: which resources are due, and claiming them with leases.

A kind of work is a table whose rows carry `uuid`, `generation`,
`observed_generation`, `conditions` and `next_reconcile_at`; it is registered
once here (`register`) and every query below iterates over the registry.

A resource is due when `next_reconcile_at <= now`. Every desired-state write
sets it to now and every pass to when it wants to be looked at again (None at
rest), so claims and next-due lookups are ordered scans of that index that stop
at the first rows they need, whatever the backlog.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    Select,
    Table,
    and_,
    bindparam,
    func,
    literal,
    or_,
    select,
    update,
)

from shoal.db import leases
from shoal.db.engine import Database
from shoal.db.tables import Base, ClusterRow, LeaseRow, NodeGroupRow, table_of
from shoal.db.types import UTCDateTime, utcnow

# Small node groups (at most BATCH_NODES nodes) of one cluster that are due together
# are claimed and passed together, at most BATCH_MAX of them (claim_due_groups).
BATCH_NODES = 32
BATCH_MAX = 16


@dataclass(frozen=True)
class Kind:
    """One kind of work: its name (the lease prefix) and its table."""

    name: str
    row: type[Any]  # the mapped class (queries name its columns)

    @property
    def table(self) -> Table:
        return table_of(self.row)


KINDS: dict[str, Kind] = {}


def register(name: str, row: type[Base]) -> Kind:
    """Make `row`'s table a queue of work named `name` (lease keys "<name>:<uuid>")."""
    kind = Kind(name, row)
    KINDS[name] = kind
    return kind


NODEGROUP = register("nodegroup", NodeGroupRow)
CLUSTER = register("cluster", ClusterRow)


def _due(row: Any, now: Any) -> Any:
    return row.next_reconcile_at <= now


def _free(now: Any) -> Any:
    """No lease on the joined resource, or an expired one."""
    return or_(LeaseRow.resource.is_(None), LeaseRow.expires_at <= now)


def _lease_join(kind: Kind) -> Any:
    return LeaseRow.resource == literal(kind.name + ":").concat(kind.row.uuid)


@functools.cache
def _claim_query(kind: Kind, *, lock: bool = False) -> Select[Any]:
    """The due, unleased resources of `kind`, oldest due first (node groups with
    their cluster and desired size); `now` and `limit` are parameters. Built once
    per variant: claims run several times per pass, and building and hashing
    this statement cost more than SQLite running it."""
    row = kind.row
    now = bindparam("now", type_=UTCDateTime())
    cols = (row.uuid, row.cluster_uuid, row.node_count) if kind is NODEGROUP else (row.uuid,)
    q = (
        select(*cols)
        .outerjoin(LeaseRow, _lease_join(kind))
        .where(_due(row, now), _free(now))
        .order_by(row.next_reconcile_at, row.id)
        .limit(bindparam("limit", type_=Integer()))
    )
    return q.with_for_update(skip_locked=True, of=row) if lock else q


@functools.cache
def _siblings_query(*, lock: bool = False) -> Select[str, str]:
    """The due, unleased small node groups of some clusters (`clusters`, `now`)."""
    now = bindparam("now", type_=UTCDateTime())
    q = (
        select(NodeGroupRow.uuid, NodeGroupRow.cluster_uuid)
        .outerjoin(LeaseRow, _lease_join(NODEGROUP))
        .where(
            _due(NodeGroupRow, now),
            _free(now),
            NodeGroupRow.cluster_uuid.in_(bindparam("clusters", expanding=True)),
            NodeGroupRow.node_count <= BATCH_NODES,
        )
        .order_by(NodeGroupRow.next_reconcile_at, NodeGroupRow.id)
    )
    return q.with_for_update(skip_locked=True, of=NodeGroupRow) if lock else q


@functools.cache
def _next_query(kind: Kind) -> Select[Any]:
    """The earliest requeue time of an unleased resource of `kind` (`now` a parameter)."""
    row = kind.row
    now = bindparam("now", type_=UTCDateTime())
    return (
        select(row.next_reconcile_at)
        .outerjoin(LeaseRow, _lease_join(kind))
        .where(row.next_reconcile_at.is_not(None), _free(now))
        .order_by(row.next_reconcile_at)
        .limit(1)
    )


_NEXT_EXPIRY = (
    select(LeaseRow.expires_at)
    .where(LeaseRow.expires_at > bindparam("now", type_=UTCDateTime()))
    .order_by(LeaseRow.expires_at)
    .limit(1)
)


def _unobserved(row: Any) -> Any:
    return and_(row.observed_generation < row.generation, row.next_reconcile_at.is_(None))


def requeue_unobserved(db: Database, now: datetime) -> int:
    """The safety net: a resource whose generation moved but that has no requeue
    time (a desired-state write that did not set one) is made due now. Run by
    the conductor's heartbeat, not by every claim; a read finds most times that
    there is nothing to do. Returns how many it requeued."""
    with db.core_read() as s:
        stale = [k for k in KINDS.values() if s.scalar(select(k.row.id).where(_unobserved(k.row)))]
    found = 0
    if stale:
        with db.core_write() as s:
            for k in stale:
                stmt = update(k.table).where(_unobserved(k.row)).values(next_reconcile_at=now)
                found += s.execute(stmt).rowcount
    return found


@dataclass(frozen=True)
class Look:
    """What a conductor may claim, as one read (or a claim's transaction) saw it at
    `now`: per kind, the earliest requeue time of a resource nobody holds (absent:
    none), and the earliest expiry of a lease someone holds (a crashed holder's
    work becomes claimable then)."""

    now: datetime
    free: dict[str, datetime]
    expiry: datetime | None

    def due(self, kind: str) -> bool:
        """Whether a resource of `kind` is due and free."""
        t = self.free.get(kind)
        return t is not None and t <= self.now

    @property
    def any_due(self) -> bool:
        return any(t <= self.now for t in self.free.values())

    @property
    def next_at(self) -> datetime | None:
        """When something may next be claimable (`next_due_at`)."""
        return min(self._times(), default=None)

    def next_coming(self) -> datetime | None:
        """The earliest of these times still to come (a kind whose free work is due
        already gives none: for a conductor that leaves that work to its peers)."""
        return min((t for t in self._times() if t > self.now), default=None)

    def _times(self) -> list[datetime]:
        return [*self.free.values(), *([self.expiry] if self.expiry is not None else [])]


@dataclass
class Seen:
    """Filled by a claim: what its transaction saw after its own claims (`Look`)."""

    look: Look | None = None


def _look(s: Connection, now: datetime) -> Look:
    """One ordered index scan of one row per kind, and one for the leases; in a claim's
    transaction its own new leases count as held."""
    params = {"now": now}
    free = {n: t for n, k in KINDS.items() if (t := s.scalar(_next_query(k), params)) is not None}
    return Look(now, free, s.scalar(_NEXT_EXPIRY, params))


def look(db: Database, now: datetime) -> Look:
    """What may be claimed now and next, in one read (an idle worker's look: most
    find nothing, and a read answers that without opening a write transaction)."""
    with db.core_read() as s:
        return _look(s, now)


def _nothing_due(db: Database, kind: Kind, now: datetime) -> bool:
    """Whether no resource of `kind` is due and free: most looks find nothing, and a
    read answers that without opening a write transaction."""
    with db.core_read() as s:
        return s.scalar(_claim_query(kind), {"now": now, "limit": 1}) is None


def claim_due(
    db: Database,
    kind: Kind,
    holder: str,
    now: datetime,
    ttl: float,
    limit: int,
    *,
    release: Collection[str] = (),
    looked: bool = False,
    seen: Seen | None = None,
) -> list[str]:
    """Lease up to `limit` due resources of `kind`, after releasing `holder`'s leases
    `release` in the same transaction.

    On PostgreSQL the candidates are locked FOR UPDATE SKIP LOCKED, so
    conductors claiming at the same moment take different resources. `looked`:
    the caller has just read that some is due (no read of its own first); `seen`:
    filled with what the transaction saw after its claims.
    """
    if not release and not looked and _nothing_due(db, kind, now):
        return []
    q = _claim_query(kind, lock=not db.is_sqlite)
    with db.core_write() as s:
        leases.release(s, holder, release)
        uuids = list(s.scalars(q, {"now": now, "limit": limit}))
        got = [u for u in uuids if leases.claim(s, leases.key(kind.name, u), holder, now, ttl)]
        if seen is not None:
            seen.look = _look(s, now)
        return got


def claim_due_groups(
    db: Database,
    holder: str,
    now: datetime,
    ttl: float,
    limit: int,
    *,
    release: Collection[str] = (),
    merge: bool = False,
    looked: bool = False,
    seen: Seen | None = None,
) -> list[list[str]]:
    """Like `claim_due` for node groups, but a small group (at most BATCH_NODES nodes)
    comes with the other due, unleased small groups of its cluster (a batch, up
    to BATCH_MAX): one pass then reconciles them together, sharing its reads and
    writes, as when a small cluster is created and all its groups are due at
    once. Each group keeps its own lease, status and requeue time. A big group
    is a batch of its own: its creates keep a worker of their own, and its
    intent rows do not wait for other groups'. `merge`: the small groups of all
    the claimed groups' clusters make one batch (up to BATCH_MAX), for a
    conductor whose workers are all busy with a backlog of small clusters.
    `looked`, `seen`: as for `claim_due`."""
    if not release and not looked and _nothing_due(db, NODEGROUP, now):
        return []
    lock = not db.is_sqlite
    with db.core_write() as s:
        leases.release(s, holder, release)
        first = s.execute(_claim_query(NODEGROUP, lock=lock), {"now": now, "limit": limit}).all()
        if not first:
            if seen is not None:
                seen.look = _look(s, now)
            return []

        def key(uuid: str, cluster: str, size: int) -> str:  # the batch a group goes in
            return uuid if size > BATCH_NODES else "" if merge else cluster

        small = list(dict.fromkeys(r.cluster_uuid for r in first if r.node_count <= BATCH_NODES))
        # The batches, in claim order. Merging, a big group is taken only when no
        # small one is due: not claimed ahead of time to wait behind this pass.
        batches: dict[str, list[str]] = {
            key(*r): []
            for r in first
            if r.node_count <= BATCH_NODES or not merge or r is first[0] and not small
        }
        more = (
            s.execute(_siblings_query(lock=lock), {"now": now, "clusters": small}).all()
            if small
            else []
        )
        for uuid, cluster, size in [*first, *((r.uuid, r.cluster_uuid, 0) for r in more)]:
            batch = batches.get(key(uuid, cluster, size))
            if batch is None or uuid in batch or len(batch) >= BATCH_MAX:
                continue
            if leases.claim(s, leases.key(NODEGROUP.name, uuid), holder, now, ttl):
                batch.append(uuid)
        if seen is not None:
            seen.look = _look(s, now)
        return [b for b in batches.values() if b]


@dataclass(frozen=True)
class Load:
    """What a conductor needs to take only its fair share of due work."""

    due: int  # resources of the kind due now, leased or not
    oldest_unclaimed: datetime | None  # earliest due time of an unleased due resource


def load(db: Database, kind: Kind, now: datetime) -> Load:
    """Due work of `kind`, for the per-conductor fair share."""
    row = kind.row
    with db.core_read() as s:
        due = s.scalar(select(func.count()).select_from(row).where(_due(row, now)))
        oldest = s.scalar(
            _claim_query(kind).with_only_columns(row.next_reconcile_at), {"now": now, "limit": 1}
        )
    return Load(int(due or 0), oldest)


def next_due_at(db: Database, now: datetime | None = None) -> datetime | None:
    """When a conductor may next find something to claim: the earliest requeue time
    of a resource nobody holds, or the earliest expiry of a lease someone holds
    (a crashed holder's work becomes claimable then): `look(...).next_at`."""
    return look(db, now or utcnow()).next_at
