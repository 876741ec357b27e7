"""Growing up: `shoal db migrate --to postgresql://...` copies an embedded SQLite
deployment (resources, nodes, events, the sim world) and verifies every row."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select
from typer.testing import CliRunner

from shoal.cli.main import app
from shoal.db import events, migrations
from shoal.db.engine import Database
from shoal.db.tables import (
    Base,
    ClusterRow,
    ClusterTemplateRow,
    LeaseRow,
    NodeGroupRow,
    NodeGroupTemplateRow,
    NodeRow,
)
from shoal.db.types import utcnow
from shoal.drivers.contract import MachineSpec
from shoal.drivers.sim import tables as sim_tables
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld

pytestmark = pytest.mark.postgres


def _populate(
    url: str, clusters: int = 3, nodes_per_group: int = 5, sim_url: str | None = None
) -> None:
    db = Database(url)
    migrations.upgrade(db)
    world = SimWorld.open(sim_url or url, SimSettings(boot_seconds=0, api_latency_ms=0, jitter=0))
    driver = SimDriver(world)
    specs: list[MachineSpec] = []
    try:
        with db.write() as s:
            # A cluster template that references a standalone node group template.
            ngt, ct = str(uuid.uuid4()), str(uuid.uuid4())
            s.add(NodeGroupTemplateRow(uuid=ngt, project_id="p", name="gpu", spec={"role": "gpu"}))
            s.add(ClusterTemplateRow(uuid=ct, project_id="p", user_id="u", name="t", attrs={}))
            s.flush()
            s.add(
                NodeGroupTemplateRow(
                    uuid=str(uuid.uuid4()),
                    project_id="p",
                    name="gpu",
                    cluster_template_uuid=ct,
                    reference_uuid=ngt,
                    spec={"node_count": 2},
                )
            )
            for c in range(clusters):
                cu = str(uuid.uuid4())
                s.add(
                    ClusterRow(
                        uuid=cu,
                        project_id="p",
                        user_id="u",
                        name=f"c{c}",
                        attrs={"coe": "kubernetes", "labels": {"a": "b"}},
                    )
                )
                s.flush()
                for g in ("default-master", "default-worker"):
                    gu = str(uuid.uuid4())
                    s.add(
                        NodeGroupRow(
                            uuid=gu,
                            cluster_uuid=cu,
                            project_id="p",
                            name=g,
                            role="master" if "master" in g else "worker",
                            node_count=nodes_per_group,
                            spec={"flavor_id": "m1.small"},
                        )
                    )
                    s.flush()
                    for i in range(nodes_per_group):
                        nu = str(uuid.uuid4())
                        s.add(
                            NodeRow(
                                uuid=nu,
                                name=f"c{c}-{g}-{i}",
                                cluster_uuid=cu,
                                nodegroup_uuid=gu,
                                project_id="p",
                                state="ACTIVE",
                                availability_zone="az-1",
                                address=f"10.0.{c}.{i}",
                            )
                        )
                        specs.append(
                            MachineSpec(
                                machine_id=nu,
                                name=f"c{c}-{g}-{i}",
                                project_id="p",
                                cluster_id=cu,
                                nodegroup_id=gu,
                                role="worker",
                                flavor_id="m1.small",
                                image_id="fedora-coreos-40",
                                availability_zone="az-1",
                            )
                        )
                events.record(s, cu, "Created", f"cluster c{c} created")
        for spec in specs:  # intent committed first, then the cloud is asked
            driver.ensure_machine(spec)
    finally:
        world.close()
        db.close()


def test_an_embedded_deployment_with_its_sim_file_moves_to_postgres(
    tmp_path: Path, pg_url: str
) -> None:
    """The embedded layout: shoal.db and sim.db in one data directory, migrated
    with the configured locations (no --from)."""
    data = tmp_path / "data"
    data.mkdir()
    db_url, sim_url = f"sqlite:///{data / 'shoal.db'}", f"sqlite:///{data / 'sim.db'}"
    _populate(db_url, sim_url=sim_url, clusters=2)
    env = {"SHOAL_DATA_DIR": str(data)}
    result = CliRunner().invoke(app, ["db", "migrate", "--to", pg_url], env=env)
    assert result.exit_code == 0, result.output
    assert _count(pg_url, NodeRow.__table__) == _count(db_url, NodeRow.__table__) == 20
    assert _count(pg_url, sim_tables.servers) == _count(sim_url, sim_tables.servers) == 20
    assert "verified      20 rows of sim_servers" in result.output


def _count(url: str, table: object) -> int:
    db = Database(url)
    try:
        with db.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]
    finally:
        db.close()


def _references(url: str) -> list[tuple[str, str | None]]:
    """(entry uuid, referenced NGT uuid) of the cluster template entries that reference one."""
    db = Database(url)
    try:
        with db.read() as s:
            t = NodeGroupTemplateRow
            rows = s.execute(select(t.uuid, t.reference_uuid).where(t.reference_uuid.is_not(None)))
            return [(a, b) for a, b in rows]
    finally:
        db.close()


def test_sqlite_deployment_moves_to_postgres(tmp_path: Path, pg_url: str) -> None:
    src = f"sqlite:///{tmp_path / 'shoal.db'}"
    _populate(src)
    result = CliRunner().invoke(app, ["db", "migrate", "--from", src, "--to", pg_url])
    assert result.exit_code == 0, result.output
    assert "verified" in result.output and "Now run shoal on it" in result.output
    for table in [*Base.metadata.sorted_tables, *sim_tables.metadata.sorted_tables]:
        if table.name == "alembic_version":
            continue
        assert _count(pg_url, table) == _count(src, table), table.name
    assert _count(pg_url, NodeRow.__table__) == 30
    assert _count(pg_url, sim_tables.servers) == 30
    assert _references(pg_url) == _references(src) and len(_references(src)) == 1
    # The service runs on the target: new rows get fresh ids past the copied ones.
    db = Database(pg_url)
    try:
        with db.write() as s:
            row = ClusterRow(uuid=str(uuid.uuid4()), project_id="p", user_id="u", name="new")
            s.add(row)
            s.flush()
            assert row.id == 4
    finally:
        db.close()


def test_migrate_refuses_a_non_empty_target_and_changes_nothing(
    tmp_path: Path, pg_url: str
) -> None:
    src = f"sqlite:///{tmp_path / 'shoal.db'}"
    _populate(src, clusters=1)
    _populate(pg_url, clusters=2)
    before = _count(pg_url, NodeRow.__table__)
    result = CliRunner().invoke(app, ["db", "migrate", "--from", src, "--to", pg_url])
    assert result.exit_code == 1
    assert "already holds data" in result.output
    assert "Traceback" not in result.output
    assert _count(pg_url, NodeRow.__table__) == before


def test_migrate_refuses_while_a_conductor_holds_a_lease(tmp_path: Path, pg_url: str) -> None:
    src = f"sqlite:///{tmp_path / 'shoal.db'}"
    _populate(src, clusters=1)
    db = Database(src)
    try:
        with db.write() as s:
            s.add(
                LeaseRow(
                    resource="cluster:x",
                    holder="host-1:123",
                    expires_at=utcnow().replace(year=utcnow().year + 1),
                )
            )
    finally:
        db.close()
    result = CliRunner().invoke(app, ["db", "migrate", "--from", src, "--to", pg_url])
    assert result.exit_code == 1
    assert "stop every shoal process" in result.output
    target = Database(pg_url)
    try:
        assert inspect(target.engine).get_table_names() == []  # untouched
    finally:
        target.close()
