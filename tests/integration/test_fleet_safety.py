"""Nothing an operator does by mistake destroys machines: a restored backup adopts
what the cloud holds instead of recreating it, the sweeper deletes only machines
of vanished groups after a grace period and stops before deleting a fleet, and a
half-copied database is refused until `shoal db migrate` finishes it. Real
database, real sim world (in a file of its own, so it outlives shoal's)."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete

from shoal.db import deployment_state, migrations, providers
from shoal.db.engine import Database
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow
from shoal.db.types import utcnow
from shoal.runtime import build_runtime
from shoal.settings import Settings, SettingsError
from tests.integration.conductor_support import FAST_CONDUCTOR, env_at

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


def test_the_sweeper_waits_a_grace_period_and_stops_before_a_fleet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shoal.db'}"
    with env_at(url, worlds={"sim": f"sqlite:///{tmp_path / 'sim.db'}"}) as env:
        cid = env.create("lost", [MASTER, worker(12)])
        env.step_until(env.complete(cid))
        env.conductor.housekeeping.check_providers()
        machines = set(env.servers(cid))
        with env.db.write() as s:  # the rows are lost (a wrong database, a bad restore)
            for table in (NodeRow, NodeGroupRow):
                s.execute(delete(table))
            s.execute(delete(ClusterRow))
        assert env.conductor.sweep() == 0  # first seen: the grace period starts
        env.skew[0] += timedelta(seconds=FAST_CONDUCTOR.sweep_grace_seconds + 1)
        assert env.conductor.sweep() == 0  # 13 of 13: the breaker holds
        assert set(env.servers(cid)) == machines
        said = providers.latest(env.db)["sim"].sweeper
        assert said is not None and "would delete 13 of 13 machines" in said
    bold = dataclasses.replace(FAST_CONDUCTOR, sweep_breaker_share=1.0, sweep_grace_seconds=0)
    with env_at(url, bold, worlds={"sim": f"sqlite:///{tmp_path / 'sim.db'}"}) as env:
        assert env.conductor.sweep() == 13  # the operator said so: they truly are orphans
        assert providers.latest(env.db)["sim"].sweeper is None


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
