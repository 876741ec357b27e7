"""The machines the sweeper holds (tagged by shoal for a node group the database does
not know) and the tombstones of what shoal deleted.

Every conductor process reads and writes the same rows, so the list, each
machine's first sighting and an admin's delete requests outlive a restart and are
shared. A machine is deleted only when its group (or cluster) has a tombstone or
an admin asked; the tombstone is written in the transaction that removes the
group's row, and purged after `tombstone_days`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select, update

from shoal.db.engine import Database, dialect_of, upsert
from shoal.db.tables import OrphanRow, TombstoneRow, table_of

CHUNK = 500
_OR, _TS = table_of(OrphanRow), table_of(TombstoneRow)
KIND_NODEGROUP, KIND_CLUSTER = "nodegroup", "cluster"


@dataclass(frozen=True)
class Seen:
    """One machine a sweep found without a known node group, as the provider listed it."""

    provider: str
    machine_id: str
    name: str
    state: str
    tags: Mapping[str, str]
    project_id: str | None
    cluster_uuid: str | None
    nodegroup_uuid: str | None
    role: str | None = None
    flavor_id: str | None = None
    image_id: str | None = None
    availability_zone: str | None = None


@dataclass(frozen=True)
class Held:
    """A held machine as stored: what it is, since when, and whether an admin asked
    for its deletion."""

    seen: Seen
    first_seen: datetime
    last_seen: datetime
    delete_requested_at: datetime | None = None
    delete_requested_by: str | None = None


_SEEN_COLUMNS = (
    "provider",
    "machine_id",
    "name",
    "state",
    "tags",
    "project_id",
    "cluster_uuid",
    "nodegroup_uuid",
    "role",
    "flavor_id",
    "image_id",
    "availability_zone",
)


def _held(row: Any) -> Held:
    seen = Seen(**{k: getattr(row, k) for k in _SEEN_COLUMNS})
    return Held(
        seen, row.first_seen, row.last_seen, row.delete_requested_at, row.delete_requested_by
    )


def refresh(db: Database, provider: str, seen: Sequence[Seen], now: datetime) -> list[Held]:
    """Make the held list of `provider` what its sweep saw (one transaction): new
    machines held from `now`, known ones refreshed (their first sighting and any
    delete request kept), the rest forgotten (gone, or owned again). Returns the
    held machines of `provider`."""
    ids = {s.machine_id for s in seen}
    with db.core_write() as s:
        stored = set(s.scalars(select(_OR.c.machine_id).where(_OR.c.provider == provider)))
        gone = sorted(stored - ids)
        for i in range(0, len(gone), CHUNK):
            chunk = gone[i : i + CHUNK]
            s.execute(delete(_OR).where(_OR.c.provider == provider, _OR.c.machine_id.in_(chunk)))
        if seen:
            ins = upsert(dialect_of(s), _OR)
            fresh = ins.excluded
            keep = ("provider", "machine_id")
            changed = {k: fresh[k] for k in _SEEN_COLUMNS if k not in keep}
            stmt = ins.on_conflict_do_update(
                index_elements=[_OR.c.provider, _OR.c.machine_id],
                set_={**changed, "last_seen": fresh.last_seen},
            )
            rows = [
                {
                    **{k: getattr(m, k) for k in _SEEN_COLUMNS},
                    "tags": dict(m.tags),
                    "first_seen": now,
                    "last_seen": now,
                }
                for m in seen
            ]
            for i in range(0, len(rows), CHUNK):
                s.execute(stmt, rows[i : i + CHUNK])
        held = s.execute(select(_OR).where(_OR.c.provider == provider)).all()
    return [_held(r) for r in held]


def held(db: Database, cluster_uuid: str | None = None) -> list[Held]:
    """Every held machine (of one claimed cluster when given), oldest sighting first."""
    q = select(_OR).order_by(_OR.c.first_seen, _OR.c.provider, _OR.c.machine_id)
    if cluster_uuid is not None:
        q = q.where(_OR.c.cluster_uuid == cluster_uuid)
    with db.core_read() as s:
        return [_held(r) for r in s.execute(q).all()]


def request_delete(
    db: Database, machine_ids: Collection[str], by: str, now: datetime
) -> tuple[list[Held], list[str]]:
    """Mark held machines for deletion by the next sweep (all or none): the marked,
    and the ids that are not held (then nothing is marked)."""
    wanted = sorted(set(machine_ids))
    with db.core_write() as s:
        rows = s.execute(select(_OR).where(_OR.c.machine_id.in_(wanted))).all()
        missing = sorted(set(wanted) - {r.machine_id for r in rows})
        if missing:
            return [], missing
        s.execute(
            update(_OR)
            .where(_OR.c.machine_id.in_(wanted), _OR.c.delete_requested_at.is_(None))
            .values(delete_requested_at=now, delete_requested_by=by)
        )
        rows = s.execute(select(_OR).where(_OR.c.machine_id.in_(wanted))).all()
    return [_held(r) for r in rows], []


def forget(conn: Connection, machine_ids: Collection[str]) -> None:
    """No longer hold these machines (their groups were adopted)."""
    ids = sorted(set(machine_ids))
    for i in range(0, len(ids), CHUNK):
        conn.execute(delete(_OR).where(_OR.c.machine_id.in_(ids[i : i + CHUNK])))


def bury(conn: Connection, kind: str, uuids: Mapping[str, str], now: datetime) -> None:
    """Tombstones for node groups or clusters shoal deletes (`uuids`: uuid -> its
    cluster's uuid), in the caller's transaction (the one removing their rows)."""
    if not uuids:
        return
    ins = upsert(dialect_of(conn), _TS)
    rows = [
        {"uuid": u, "kind": kind, "cluster_uuid": c, "deleted_at": now} for u, c in uuids.items()
    ]
    conn.execute(ins.on_conflict_do_nothing(index_elements=[_TS.c.uuid]), rows)


def buried(db: Database, uuids: Collection[str]) -> set[str]:
    """Which of `uuids` (node groups or clusters) shoal recorded deleting."""
    ids = sorted(set(uuids))
    found: set[str] = set()
    with db.core_read() as s:
        for i in range(0, len(ids), CHUNK):
            found.update(s.scalars(select(_TS.c.uuid).where(_TS.c.uuid.in_(ids[i : i + CHUNK]))))
    return found


def purge_tombstones(db: Database, before: datetime) -> int:
    """Forget tombstones older than `before`; how many."""
    with db.core_write() as s:
        return s.execute(delete(_TS).where(_TS.c.deleted_at < before)).rowcount or 0
