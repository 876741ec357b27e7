"""Deleting a cluster asks only the providers its node groups were made in to release
what they hold for it (a Heat cluster stack, an address lease): a provider the cluster
never used, down, does not hold its deletion; one it used and that is down does, until
it answers. A real conductor steps over two sim worlds whose drivers release things
(feature RELEASE) and count the asks; one of them can be down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from shoal.db import migrations
from shoal.db.engine import Database
from shoal.db.tables import ClusterRow, NodeGroupRow, table_of
from shoal.domain import model as m
from shoal.drivers.contract import TAG_CLUSTER, Feature, TransientError
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.world import SimWorld
from shoal.services import nodegroups
from tests.integration.conductor_support import Env, env_at

MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "flavor_id": "m1.small", "node_count": 2}


class ReleasingSim(SimDriver):
    """The sim driver with something to release per cluster: it records each ask, and
    fails them while `down`."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(world)
        self.features = self.features | {Feature.RELEASE}
        self.asked: list[str] = []
        self.down = False

    def release_cluster(self, project_id: str, cluster_id: str) -> None:
        self.asked.append(cluster_id)
        if self.down:
            raise TransientError("the cloud does not answer")


class EarlySim(ReleasingSim):
    """A releasing sim whose release may start beside the groups' deletion (feature
    RELEASE_EARLY): each ask is recorded with the cluster's machines left then."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(world)
        self.features = self.features | {Feature.RELEASE_EARLY}
        self.seen: list[tuple[str, str, int]] = []  # (ask, cluster, its machines left)

    def begin_release(self, project_id: str, cluster_id: str) -> None:
        self.seen.append(("begin", cluster_id, self._left(cluster_id)))
        if self.down:
            raise TransientError("the cloud does not answer")

    def release_cluster(self, project_id: str, cluster_id: str) -> None:
        self.seen.append(("release", cluster_id, self._left(cluster_id)))
        super().release_cluster(project_id, cluster_id)

    def _left(self, cluster_id: str) -> int:
        return len(self.list_machines({TAG_CLUSTER: cluster_id}))


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    worlds = {
        "east": f"sqlite:///{tmp_path / 'east.db'}",
        "west": f"sqlite:///{tmp_path / 'west.db'}",
    }
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", worlds=worlds, driver=ReleasingSim) as e:
        yield e


def driver(env: Env, name: str) -> ReleasingSim:
    p = env.conductor.ctx.provider(name)
    assert p is not None and isinstance(p.driver, ReleasingSim)
    return p.driver


def on(group: dict[str, object], provider: str) -> dict[str, object]:
    return {**group, "labels": {"provider": provider}}


def test_a_provider_the_cluster_never_used_is_not_asked_and_does_not_hold_it(env: Env) -> None:
    east, west = driver(env, "east"), driver(env, "west")
    cid = env.create("c1", [on(MASTER, "west"), on(WORKER, "west")])
    env.step_until(env.complete(cid))
    east.down = True
    env.delete(cid)
    env.step_until(lambda: env.cluster(cid) is None)
    assert west.asked == [cid]
    assert cid not in east.asked


def test_a_provider_the_cluster_used_holds_it_until_it_answers(env: Env) -> None:
    east, west = driver(env, "east"), driver(env, "west")
    cid = env.create("c2", [MASTER, on(WORKER, "west")])  # the master on east, the default
    env.step_until(env.complete(cid))
    east.down = True
    env.delete(cid)
    env.step_until(lambda: not env.servers(cid) and east.asked.count(cid) >= 2)
    c = env.cluster(cid)
    assert c is not None and c.status == "DELETE_IN_PROGRESS"
    east.down = False
    env.step_until(lambda: env.cluster(cid) is None)
    assert west.asked.count(cid) >= 1 and east.asked[-1] == cid


def test_a_group_added_later_records_its_provider(env: Env) -> None:
    east, west = driver(env, "east"), driver(env, "west")
    cid = env.create("c3", [on(MASTER, "west")])
    env.step_until(env.complete(cid))
    extra = on({"name": "extra", "flavor_id": "m1.small", "node_count": 1}, "east")
    nodegroups.create(env.db, env.caller, cid, extra, m.ProviderNames(env.names, "east"))
    c = env.cluster(cid)
    assert c is not None and c.providers == ("east", "west")
    env.step_until(env.complete(cid))
    env.delete(cid)
    env.step_until(lambda: env.cluster(cid) is None)
    assert east.asked == [cid] and west.asked == [cid]


@pytest.fixture
def early(tmp_path: Path) -> Iterator[Env]:
    worlds = {"east": f"sqlite:///{tmp_path / 'east.db'}"}
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", worlds=worlds, driver=EarlySim) as e:
        yield e


def test_an_early_release_starts_beside_the_groups_deletion_and_is_confirmed(
    early: Env,
) -> None:
    east = driver(early, "east")
    assert isinstance(east, EarlySim)
    cid = early.create("c4", [MASTER, WORKER])
    early.step_until(early.complete(cid))
    assert east.seen == []
    early.delete(cid)
    early.step_until(lambda: early.cluster(cid) is None)
    begins = [left for ask, c, left in east.seen if (ask, c) == ("begin", cid)]
    assert begins and begins[0] == 3  # asked while the cluster's 3 machines were there
    assert east.seen[0][0] == "begin"
    assert [(ask, left) for ask, c, left in east.seen if ask == "release"] == [("release", 0)]


def test_an_early_release_refused_does_not_hold_the_deletion(early: Env) -> None:
    east = driver(early, "east")
    assert isinstance(east, EarlySim)
    cid = early.create("c5", [MASTER])
    early.step_until(early.complete(cid))
    east.down = True
    early.delete(cid)
    early.step_until(lambda: not early.servers(cid) and east.asked.count(cid) >= 1)
    east.down = False
    early.step_until(lambda: early.cluster(cid) is None)
    assert ("begin", cid, 1) in east.seen


def test_migration_0014_records_the_providers_of_existing_clusters(db_url: str) -> None:
    db = Database(db_url)
    try:
        migrations.upgrade(db, "0013")
        clusters, groups = table_of(ClusterRow), table_of(NodeGroupRow)
        base = {"project_id": "p", "user_id": "u", "attrs": {}}
        with db.write_engine.begin() as conn:
            for uuid in ("c-used", "c-empty"):
                conn.execute(insert(clusters).values(uuid=uuid, name=uuid, **base))
            for name, provider in (("a", "west"), ("b", None), ("c", "west")):
                conn.execute(insert(groups).values(
                    uuid=f"g-{name}", cluster_uuid="c-used", project_id="p", name=name,
                    role="worker", spec={}, provider=provider))  # fmt: skip
        migrations.upgrade(db)
        with db.write_engine.connect() as conn:
            got = dict(conn.execute(select(clusters.c.uuid, clusters.c.providers)).all())
        assert got == {"c-used": [None, "west"], "c-empty": None}
    finally:
        db.close()
