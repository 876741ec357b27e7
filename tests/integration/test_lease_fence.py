"""A conductor paused past its lease cannot write over the conductor that took the
resource over: every pass's write is fenced by the lease it was made under."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from shoal.db import leases, migrations, outcomes, queue, snapshots, writes
from shoal.db.engine import Database
from shoal.db.tables import EventRow
from shoal.db.types import utcnow
from shoal.services import clusters
from shoal.services.context import Caller

GROUPS = [{"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}]


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    d = Database(db_url)
    migrations.upgrade(d)
    yield d
    d.close()


def test_a_write_under_a_lost_lease_is_dropped(db: Database) -> None:
    body = {"name": "f", "image_id": "fedora-coreos-40", "node_groups": GROUPS}
    cid = clusters.create(db, Caller("p1"), body, quota_default=20).uuid
    snap = snapshots.load_clusters(db, [cid])[cid]
    group = snap.groups[0].uuid
    key = leases.key(queue.NODEGROUP.name, group)
    now = utcnow()
    with db.core_write() as s:
        assert leases.claim(s, key, "a", now, ttl=15)
    later = now + timedelta(seconds=16)  # "a" paused past its lease; "b" takes over
    with db.core_write() as s:
        assert leases.claim(s, key, "b", later, ttl=15)

    g = snapshots.load_groups(db, [group])[group]
    w = writes.GroupWrite(events=[writes.EventIn("Probe", "stale", "Normal", group)])
    with pytest.raises(leases.LeaseLost):
        outcomes.apply_groups(db, [(g, w)], later, holder="a")
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(EventRow).where(
            EventRow.reason == "Probe")) == 0  # fmt: skip

    w = writes.GroupWrite(events=[writes.EventIn("Probe", "current", "Normal", group)])
    outcomes.apply_groups(db, [(g, w)], later, holder="b")
    with db.read() as s:
        assert s.scalars(select(EventRow.message).where(EventRow.reason == "Probe")).all() == [
            "current"
        ]
