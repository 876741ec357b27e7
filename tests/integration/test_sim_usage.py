"""The sim's usage counters on PostgreSQL (drivers/sim/world.py): a create takes its zone's
and its project's room by conditional updates just before it commits, so creates in
other zones never wait for it, and creates at once from several processes never put
more in a zone or a project than it holds."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from shoal.drivers.contract import BlockedError, BlockedKind, MachineSpec
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from tests.support.databases import throwaway_pg
from tests.support.waiting import scaled

pytestmark = pytest.mark.postgres
FAST = SimSettings(api_latency_ms=0, boot_seconds=0, delete_seconds=0, jitter=0)


def spec(n: int, az: str | None = None, project: str = "p") -> MachineSpec:
    return MachineSpec(machine_id=f"m-{n}", name=f"node-{n}", project_id=project,
                       cluster_id="c", nodegroup_id="ng", role="worker", flavor_id="m1.large",
                       image_id="ubuntu-24.04", availability_zone=az)  # fmt: skip


@contextlib.contextmanager
def two_worlds() -> Iterator[tuple[SimWorld, SimWorld]]:
    """Two processes' views of one world on a throwaway PostgreSQL database."""
    with throwaway_pg() as url:
        a = SimWorld.open(url, FAST, ManualClock())
        b = SimWorld.open(url, FAST, ManualClock())
        try:
            yield a, b
        finally:
            a.close()
            b.close()


def outcome(world: SimWorld, s: MachineSpec) -> str:
    try:
        world.create(s)
        return "made"
    except BlockedError as err:
        return err.kind.value


def test_a_create_does_not_wait_for_another_zones_creates() -> None:
    with throwaway_pg() as url:
        world = SimWorld.open(url, FAST, ManualClock())
        try:
            world.create(spec(1, "az-1"))  # the usage rows exist
            with psycopg.connect(url) as holder:  # a create in az-1, mid-transaction
                holder.execute("SELECT 1 FROM sim_usage WHERE scope = 'az' AND key = 'az-1' "
                               "FOR UPDATE")  # fmt: skip
                done = threading.Event()
                worker = threading.Thread(
                    target=lambda: (world.create(spec(2, "az-2")), done.set())
                )
                worker.start()
                worker.join(timeout=scaled(20))
                assert done.is_set(), "a create in az-2 waited for a transaction in az-1"
                holder.rollback()
            assert {s.machine_id: s.az for s in world.find({})} == {"m-1": "az-1", "m-2": "az-2"}
        finally:
            world.close()


def test_creates_at_once_from_two_processes_never_overfill_a_zone_or_a_quota() -> None:
    with two_worlds() as (a, b):
        a.patch_config({"az_capacity_cores": {"az-2": 40}})  # ten m1.large (4 cores)
        b.set_quota("q", {"instances": 7})
        zone = [(a if n % 2 else b, spec(n, "az-2")) for n in range(30)]
        quota = [(a if n % 2 else b, spec(n, "az-1", "q")) for n in range(100, 130)]
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda ws: outcome(*ws), zone + quota))
        assert got[:30].count("made") == 10
        assert set(got[:30]) == {"made", BlockedKind.NO_VALID_HOST.value}
        assert got[30:].count("made") == 7
        assert set(got[30:]) == {"made", BlockedKind.QUOTA.value}
        assert len(a.find({})) == 17
        assert b.quota("p")["usage"] == {"instances": 10, "cores": 40, "ram_mb": 10 * 8192}
        assert a.quota("q")["usage"]["instances"] == 7
        with pytest.raises(BlockedError, match="No valid host was found in az-2 .*40 of 40"):
            a.create(spec(99, "az-2"))


def test_one_server_created_at_once_from_two_processes_is_made_and_counted_once() -> None:
    with two_worlds() as (a, b):
        with ThreadPoolExecutor(8) as pool:
            made = list(pool.map(lambda w: w.create(spec(1)).machine_id, [a, b] * 8))
        assert made == ["m-1"] * 16
        assert [s.machine_id for s in b.find({})] == ["m-1"]
        assert a.quota("p")["usage"]["instances"] == 1
