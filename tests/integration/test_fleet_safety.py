"""Nothing an operator does by mistake destroys machines: a restored backup adopts
what the cloud holds instead of recreating it, the sweeper deletes only machines
of vanished groups after a grace period and stops before deleting a fleet, and a
half-copied database is refused until `shoal db migrate` finishes it. Real
database, real sim world (in a file of its own, so it outlives shoal's)."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete

from shoal.db import deployment_state, migrations, providers
from shoal.db import orphans as dbo
from shoal.db.engine import Database
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain.errors import Conflict, Forbidden, NotFound
from shoal.runtime import build_runtime
from shoal.services import nodegroups, orphans
from shoal.services.context import Caller
from shoal.settings import Settings, SettingsError
from tests.integration.conductor_support import ALL, FAST_CONDUCTOR, Env, env_at
from tests.support.databases import throwaway_pg

ADMIN, MEMBER = Caller("p1"), Caller("p1", roles=frozenset({"member"}))
MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}


def worker(count: int) -> dict[str, object]:
    return {"name": "w", "flavor_id": "m1.small", "node_count": count}


def backup(db_file: Path, to: Path) -> None:
    """A consistent copy of a live SQLite database (SQLite's backup API)."""
    src, dst = sqlite3.connect(db_file), sqlite3.connect(to)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_restoring_an_older_backup_recreates_nothing(tmp_path: Path) -> None:
    db_file, saved = tmp_path / "shoal.db", tmp_path / "backup.db"
    worlds = {"sim": f"sqlite:///{tmp_path / 'sim.db'}"}
    with env_at(f"sqlite:///{db_file}", worlds=worlds) as env:
        cid = env.create("c", [MASTER, worker(5)])
        env.step_until(env.complete(cid))
        backup(db_file, saved)
        env.resize(cid, "w", 8)
        env.step_until(lambda: len(env.nodes(cid, "w")) == 8 and env.complete(cid)())
        before = set(env.servers(cid))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_file}{suffix}").unlink(missing_ok=True)
    shutil.copy(saved, db_file)  # the backup, taken before the resize
    with env_at(f"sqlite:///{db_file}", worlds=worlds) as env:
        assert len(env.nodes(cid, "w")) == 5  # what the backup says
        # At rest, the restored groups look again at their periodic resync.
        env.skew[0] += timedelta(seconds=FAST_CONDUCTOR.sweep_seconds * 1.3)
        env.step_until(lambda: len(env.servers(cid)) == 6 and env.complete(cid)())
        after = set(env.servers(cid))
        assert after <= before, "a machine was made anew"
        assert len(after) == 1 + 5  # the backup's counts: the surplus went, nothing else
        assert {n.uuid for n in env.nodes(cid)} == after
        adopted = [e for e in env.events(cid) if e.reason == "MachineAdopted"]
        assert len(adopted) == 3


@contextlib.contextmanager
def database(kind: str, tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'shoal.db'}"
    else:
        with throwaway_pg() as url:
            yield url


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_machines_the_database_does_not_know_are_held_until_an_admin_names_them(
    tmp_path: Path, kind: str
) -> None:
    # Even with no grace and no breaker, nothing unknown is deleted.
    bold = dataclasses.replace(FAST_CONDUCTOR, sweep_breaker_share=1.0, sweep_grace_seconds=0)
    world = {"sim": f"sqlite:///{tmp_path / 'sim.db'}"}
    with database(kind, tmp_path) as url, env_at(url, bold, worlds=world) as env:
        cid = env.create("lost", [MASTER, worker(12)])
        env.step_until(env.complete(cid))
        env.conductor.housekeeping.check_providers()
        machines = set(env.servers(cid))
        with env.db.write() as s:  # the rows are lost (a wrong database, a bad restore)
            for table in (NodeRow, NodeGroupRow):
                s.execute(delete(table))
            s.execute(delete(ClusterRow))
        assert env.conductor.sweep() == 0
        env.skew[0] += timedelta(days=1)
        assert env.conductor.sweep() == 0
        assert set(env.servers(cid)) == machines
        held = orphans.list_all(env.db, ADMIN)
        assert {o.held.seen.machine_id for o in held} == machines
        assert {o.fate for o in held} == {orphans.HELD}
        assert {(o.cluster_name, o.nodegroup_name, o.held.seen.role) for o in held} == {
            ("lost", "m", "master"),
            ("lost", "w", "worker"),
        }
        assert providers.latest(env.db)["sim"].sweeper is None
        with pytest.raises(Forbidden):
            orphans.list_all(env.db, MEMBER)
        with pytest.raises(Forbidden):
            orphans.request_delete(env.db, MEMBER, sorted(machines)[:1])
        two = sorted(machines)[:2]
        with pytest.raises(NotFound, match="no-such-machine"):
            orphans.request_delete(env.db, ADMIN, [*two, "no-such-machine"])
        assert env.conductor.sweep() == 0  # all or none: nothing was asked
        orphans.request_delete(env.db, ADMIN, two)
        assert {
            o.fate for o in orphans.list_all(env.db, ADMIN) if o.held.seen.machine_id in two
        } == {orphans.ASKED}
        assert env.conductor.sweep() == 2  # the admin said so
        env.step_until(lambda: set(env.servers(cid)) == machines - set(two))
        env.conductor.sweep()
        assert len(orphans.list_all(env.db, ADMIN)) == 11


def test_machines_of_a_group_shoal_deleted_are_swept_after_grace_within_the_breaker(
    tmp_path: Path,
) -> None:
    url, world = f"sqlite:///{tmp_path / 'shoal.db'}", tmp_path / "sim.db"
    with env_at(url, worlds={"sim": f"sqlite:///{world}"}) as env:
        cid = env.create("leak", [MASTER, worker(12)])
        env.step_until(env.complete(cid))
        env.conductor.housekeeping.check_providers()
        machines = set(env.servers(cid))
        groups = {g.uuid for g in env_groups(env, cid)}
    backup(world, tmp_path / "cloud.db")  # the cloud as it was
    with env_at(url, worlds={"sim": f"sqlite:///{world}"}) as env:
        env.delete(cid)
        env.step_until(lambda: env.cluster(cid) is None and not env.servers(cid))
        assert dbo.buried(env.db, {cid, *groups}) == {cid, *groups}  # shoal wrote it down
    for suffix in ("", "-wal", "-shm"):
        Path(f"{world}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "cloud.db", world)  # the machines came back: a leak
    with env_at(url, worlds={"sim": f"sqlite:///{world}"}) as env:
        assert set(env.servers(cid)) == machines
        assert env.conductor.sweep() == 0  # first seen: the grace period starts
        fates = {o.fate for o in orphans.list_all(env.db, ADMIN)}
        assert fates == {orphans.SWEPT}
        env.skew[0] += timedelta(seconds=FAST_CONDUCTOR.sweep_grace_seconds + 1)
        assert env.conductor.sweep() == 0  # 13 of 13: the breaker holds
        said = providers.latest(env.db)["sim"].sweeper
        assert said is not None and "would delete 13 of 13 machines" in said
        assert set(env.servers(cid)) == machines
        with pytest.raises(Conflict, match="its machines are swept, not adopted"):
            orphans.adopt(env.db, ADMIN, {"cluster_id": cid})
    bold = dataclasses.replace(FAST_CONDUCTOR, sweep_breaker_share=1.0)
    with env_at(url, bold, worlds={"sim": f"sqlite:///{world}"}) as env:
        env.skew[0] += timedelta(seconds=FAST_CONDUCTOR.sweep_grace_seconds + 1)
        assert env.conductor.sweep() == 13  # the grace ran from the first sighting, kept
        assert providers.latest(env.db)["sim"].sweeper is None
        env.step_until(lambda: not env.servers(cid))


def test_a_restore_deletes_nothing_and_the_newer_cluster_is_adopted(tmp_path: Path) -> None:
    db_file, saved = tmp_path / "shoal.db", tmp_path / "backup.db"
    worlds = {"sim": f"sqlite:///{tmp_path / 'sim.db'}"}
    bold = dataclasses.replace(FAST_CONDUCTOR, sweep_breaker_share=1.0, sweep_grace_seconds=0)
    with env_at(f"sqlite:///{db_file}", bold, worlds=worlds) as env:
        old = env.create("old", [MASTER, worker(1)])
        env.step_until(env.complete(old))
        backup(db_file, saved)
        new = env.create("new", [MASTER, worker(3)])
        gpu = nodegroups.create(env.db, ADMIN, old, {"name": "gpu", "node_count": 2}).group
        env.step_until(lambda: env.complete(new)() and len(env.nodes(old, "gpu")) == 2)
        env.step_until(env.complete(old))
        made = set(env.servers(new))
        nodes = {n.uuid: n.name for n in env.nodes(new)}
        lost = {n.uuid for n in env.nodes(old, "gpu")}
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_file}{suffix}").unlink(missing_ok=True)
    shutil.copy(saved, db_file)
    with env_at(f"sqlite:///{db_file}", bold, worlds=worlds) as env:
        assert env.cluster(new) is None
        env.skew[0] += timedelta(days=1)
        assert env.conductor.sweep() == 0 and env.conductor.sweep() == 0
        assert set(env.servers(new)) == made
        assert set(env.servers(old)) >= lost  # a group of a known cluster, lost: kept too
        held = orphans.list_all(env.db, ADMIN)
        assert {o.held.seen.machine_id for o in held} == made | lost
        assert {o.held.seen.cluster_uuid for o in held} == {new, old}
        assert {o.nodegroup_name for o in held if o.held.seen.cluster_uuid == old} == {"gpu"}
        # The known cluster gets its lost group back, with its id and its machines.
        assert orphans.adopt(env.db, ADMIN, {"cluster_id": old}).uuid == old
        env.step_until(lambda: {n.uuid for n in env.nodes(old, "gpu")} == lost)
        env.step_until(env.complete(old))
        assert env.group(old, "gpu").uuid == gpu.uuid
        assert {n.uuid for n in env.nodes(old, "gpu")} == lost
        adopted = orphans.adopt(env.db, ADMIN, {"cluster_id": new})
        assert (adopted.uuid, adopted.name) == (new, "new")
        assert orphans.list_all(env.db, ADMIN) == []
        with pytest.raises(NotFound):  # adopted: nothing held claims it any more
            orphans.adopt(env.db, ADMIN, {"cluster_id": new})
        env.step_until(lambda: len(env.nodes(new)) == 4 and env.complete(new)())
        assert set(env.servers(new)) == made  # none made, none deleted
        assert {n.uuid: n.name for n in env.nodes(new)} == nodes
        assert {(g.name, g.spec.role, g.spec.node_count) for g in env_groups(env, new)} == {
            ("m", "master", 1),
            ("w", "worker", 3),
        }
        assert env.conductor.sweep() == 0
        env.resize(new, "w", 4)  # a normal cluster: it scales
        env.step_until(lambda: len(env.servers(new)) == 5 and env.complete(new)())
        assert made < set(env.servers(new))
        reasons = [e.reason for e in env.events(new)]
        assert "Adopted" in reasons and reasons.count("MachineAdopted") == 4


def env_groups(env: Env, cid: str) -> list[m.NodeGroup]:
    return [v.group for v in nodegroups.list_page(env.db, ADMIN, cid, ALL, None)]


def test_a_machine_of_an_existing_group_is_never_swept(tmp_path: Path) -> None:
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}") as env:
        cid = env.create("keep", [MASTER, worker(2)])
        env.step_until(env.complete(cid))
        with env.db.write() as s:
            s.execute(delete(NodeRow).where(NodeRow.cluster_uuid == cid))  # rows lost
        env.skew[0] += timedelta(seconds=FAST_CONDUCTOR.sweep_grace_seconds + 1)
        assert env.conductor.sweep() == 0 and env.conductor.sweep() == 0
        before = set(env.servers(cid))
        env.resize(cid, "w", 2)  # any pass of the group adopts them
        env.step_until(lambda: len(env.nodes(cid)) == 3 and env.complete(cid)())
        assert set(env.servers(cid)) == before


def test_an_unfinished_copy_is_refused_until_finished(tmp_path: Path) -> None:
    settings = Settings.from_env(env={"SHOAL_DATA_DIR": str(tmp_path)}, conductor=False)
    db = Database(settings.db_url)
    migrations.upgrade(db)
    with db.core_write() as conn:
        deployment_state.mark_copy(conn, "started by shoal db migrate", utcnow())
    with pytest.raises(SettingsError, match="this database is an unfinished copy"):
        build_runtime(settings)
    with db.core_write() as conn:
        deployment_state.clear_copy(conn)
    db.close()
    build_runtime(settings).close()
