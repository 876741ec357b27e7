"""The sim world as shared state: persistence, seeds, threads, PostgreSQL, speed."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shoal.drivers.contract import MachineSpec, MachineState
from shoal.drivers.sim import tables
from shoal.drivers.sim.clock import ManualClock, SystemClock
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld

FAST = SimSettings(api_latency_ms=0, boot_seconds=0, delete_seconds=0)


def spec(n: int, ng: str = "ng", **over: object) -> MachineSpec:
    values: dict[str, object] = dict(
        machine_id=f"m-{n}", name=f"node-{n}", project_id="p", cluster_id="c",
        nodegroup_id=ng, role="worker", flavor_id="m1.small", image_id="ubuntu-24.04",
    )  # fmt: skip
    values.update(over)
    return MachineSpec(**values)  # type: ignore[arg-type]


def test_two_instances_on_one_file_see_one_world(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    clock = ManualClock()
    a = SimWorld.open(url, FAST, clock)
    b = SimWorld.open(url, FAST, clock)
    a.create(spec(1))
    assert [s.machine_id for s in b.find({})] == ["m-1"]
    assert b.create(spec(1)).machine_id == "m-1"  # idempotent across processes too
    b.patch_config({"az_capacity_cores": {"az-1": 4}})
    assert a.config()["az_capacity_cores"]["az-1"] == 4
    a.set_quota("p", {"instances": 3})
    assert b.quota("p")["limits"]["instances"] == 3
    fault = a.add_fault({"kind": "transient", "count": 1})
    assert b.faults()[0]["id"] == fault["id"]
    with pytest.raises(Exception, match="HTTP 500"):
        b.create(spec(2))
    a.create(spec(2))
    b.delete("m-1")
    assert [s.machine_id for s in a.find({})] == ["m-2"]
    a.close()
    c = SimWorld.open(url, FAST, clock)  # reopened later: still there
    assert [s.machine_id for s in c.find({})] == ["m-2"]
    c.reset()
    assert b.find({}) == [] and b.faults() == [] and b.quota("p")["limits"]["instances"] == 100_000


def test_reopening_with_new_settings_applies_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    SimWorld.open(url, SimSettings(boot_seconds=20)).patch_config({"jitter": 0.5})
    same = SimWorld.open(url, SimSettings(boot_seconds=20)).config()
    assert same["jitter"] == 0.5  # the admin change survives a reopen with the same settings
    changed = SimWorld.open(url, SimSettings(boot_seconds=3)).config()
    assert changed["boot_seconds"] == 3


def test_same_seed_same_world(tmp_path: Path) -> None:
    def run(name: str, seed: int) -> list[tuple[str, str, str | None, MachineState]]:
        clock = ManualClock()
        s = SimSettings(seed=seed, api_latency_ms=0, boot_seconds=30, jitter=0.5)
        w = SimWorld.open(f"sqlite:///{tmp_path / name}", s, clock)
        for n in range(30):
            w.create(spec(n))
        clock.advance(30)
        return [(x.machine_id, x.az, x.address, x.state) for x in w.find({})]

    assert run("a.db", 1) == run("b.db", 1)
    assert run("c.db", 2) != run("a.db", 1)


def test_addresses_are_unique(tmp_path: Path) -> None:
    w = SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", FAST, ManualClock())
    for n in range(600):
        w.create(spec(n))
    addresses = [s.address for s in w.find({})]
    assert None not in addresses and len(set(addresses)) == 600


def test_many_threads_create_each_machine_once(tmp_path: Path) -> None:
    w = SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", FAST)
    d = SimDriver(w)
    specs = [spec(n % 200, ng=f"ng{n % 200 % 4}") for n in range(800)]  # each id 4 times
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(d.ensure_machine, specs))
    assert len(d.list_machines({})) == 200
    assert w.quota("p")["usage"]["instances"] == 200
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(d.delete_machine, [f"m-{n}" for n in range(200)]))
    assert d.list_machines({}) == [] and w.quota("p")["usage"]["instances"] == 0


@pytest.mark.postgres
def test_postgresql_world_shared_by_two_instances(pg_url: str) -> None:
    clock = ManualClock()
    a = SimWorld.open(pg_url, SimSettings(api_latency_ms=0, boot_seconds=5, jitter=0), clock)
    b = SimWorld.open(pg_url, SimSettings(api_latency_ms=0, boot_seconds=5, jitter=0), clock)
    try:
        d = SimDriver(a)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(d.ensure_machine, [spec(n, ng=f"ng{n % 2}") for n in range(40)]))
        assert len(b.find({"shoal-nodegroup": "ng1"})) == 20
        b.set_quota("p", {"instances": 40})
        with pytest.raises(Exception, match="quota exceeded: instances 40 of 40"):
            a.create(spec(99))
        clock.advance(6)
        assert {s.state for s in b.find({})} == {MachineState.ACTIVE}
        b.delete("m-0")
        a.reset()
    finally:
        a.close()
        b.close()


def test_bulk_list_by_tag_returns_exactly_the_group(tmp_path: Path) -> None:
    """One listing by node group tag returns that group's machines and no other.

    (Speed is measured by the benchmarks, not asserted here.)
    """
    w = SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", FAST, SystemClock())
    d = SimDriver(w)
    specs = [spec(n, ng=f"ng{n % 3}") for n in range(300)]
    for s in specs:
        d.ensure_machine(s)
    d.ensure_machine(specs[0])  # idempotent: no second machine
    got = d.list_machines({"shoal-nodegroup": "ng1"})
    assert sorted(m.machine_id for m in got) == sorted(
        s.machine_id for s in specs if s.nodegroup_id == "ng1"
    )
    assert len(d.list_machines({})) == 300


_CHILD = """
import sys
from shoal.drivers.contract import BlockedError, MachineSpec
from shoal.drivers.sim.world import SimWorld
from shoal.drivers.sim.settings import SimSettings
w = SimWorld.open(sys.argv[1], SimSettings(api_latency_ms=0, boot_seconds=0, delete_seconds=0))
for n in range(100):
    try:
        w.create(MachineSpec(machine_id=f"{sys.argv[2]}-{n}", name="x", project_id="p",
            cluster_id="c", nodegroup_id=sys.argv[2], role="worker", flavor_id="m1.small",
            image_id="ubuntu-24.04"))
    except BlockedError as exc:
        assert "quota exceeded: instances 150 of 150" in exc.reason, exc.reason
"""


def test_separate_processes_share_one_world(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    w = SimWorld.open(url, FAST)
    w.set_quota("p", {"instances": 150})
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, url, name]) for name in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    assert w.quota("p")["usage"]["instances"] == 150  # one quota across processes
    assert len(w.find({})) == 150


def test_a_servers_user_data_lives_as_long_as_its_row(tmp_path: Path) -> None:
    """Written with the create, replaced when a gone id is created again, purged with
    its row, and an orphan left by an older world is dropped when it is opened."""
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    world = SimWorld.open(url, FAST, ManualClock())
    world.create(spec(1, user_data="#cloud-config A"))
    assert world.user_data("m-1") == "#cloud-config A"
    world.delete("m-1")  # gone at once (delete_seconds 0)
    world.create(spec(1, user_data="#cloud-config B"))  # the id is free again
    assert world.user_data("m-1") == "#cloud-config B"
    world.delete("m-1")
    world.create(spec(2, user_data="#cloud-config C"))
    world.delete("m-2")  # a delete purges what is gone: m-1 and its user data
    assert world.user_data("m-1") is None
    with world._txn(write=True) as conn:  # an orphan, as an older world left them
        conn.execute(tables.user_data.insert().values(machine_id="m-9", user_data="old"))
    world.close()
    reopened = SimWorld.open(url, FAST, ManualClock())
    assert reopened.user_data("m-9") is None
    reopened.create(spec(9, user_data="#cloud-config D"))  # no conflict with the orphan
    assert reopened.user_data("m-9") == "#cloud-config D"
