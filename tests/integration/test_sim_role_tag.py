"""Every machine carries its node group's role as a tag (`shoal-role`, what adoption
rebuilds a group from); a sim world made before servers kept it gets the column on
open, and its older servers simply have no role tag. Real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from shoal.drivers.contract import TAG_NODEGROUP, TAG_ROLE, MachineSpec
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.world import SimWorld
from tests.integration.conductor_support import FAST_SIM


def spec(n: int, role: str) -> MachineSpec:
    mid = f"4d1c0c1e-0000-4000-8000-00000000000{n}"
    return MachineSpec(mid, f"c-w-{n}", "p1", "c1", "g1", role, "m1.small", "fedora-coreos-40")


def test_an_older_world_gets_the_role_column_and_new_machines_the_tag(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    world = SimWorld.open(url, FAST_SIM)
    SimDriver(world).ensure_machine(spec(1, "master"))
    world.close()
    with sqlite3.connect(tmp_path / "sim.db") as conn:  # as a world of the last release
        conn.execute("ALTER TABLE sim_servers DROP COLUMN role")
    world = SimWorld.open(url, FAST_SIM)
    try:
        SimDriver(world).ensure_machine(spec(2, "worker"))
        tags = {m.name: dict(m.tags) for m in SimDriver(world).list_machines({TAG_NODEGROUP: "g1"})}
        assert TAG_ROLE not in tags["c-w-1"]  # made before: no role kept
        assert tags["c-w-2"][TAG_ROLE] == "worker"
        assert [m.name for m in SimDriver(world).list_machines({TAG_ROLE: "worker"})] == ["c-w-2"]
    finally:
        world.close()
