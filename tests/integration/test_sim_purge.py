"""The sim's purge of finished deletes on PostgreSQL (drivers/sim/servers.py): a delete
forgets the servers whose delete has finished, and rows another transaction is
purging (or otherwise holds) are skipped, not waited for: at 100,000 servers, deletes
from several processes queued on each other's purges."""

from __future__ import annotations

import threading

import psycopg
import pytest

from shoal.drivers.contract import MachineSpec
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from tests.support.databases import throwaway_pg
from tests.support.waiting import scaled

pytestmark = pytest.mark.postgres
FAST = SimSettings(api_latency_ms=0, boot_seconds=0, delete_seconds=0)


def spec(n: int) -> MachineSpec:
    return MachineSpec(machine_id=f"m-{n}", name=f"node-{n}", project_id="p", cluster_id="c",
                       nodegroup_id="ng", role="worker", flavor_id="m1.small",
                       image_id="ubuntu-24.04", user_data=f"#cloud-config {n}")  # fmt: skip


def test_a_delete_skips_the_finished_rows_another_transaction_holds() -> None:
    with throwaway_pg() as url:
        world = SimWorld.open(url, FAST, ManualClock())
        try:
            for n in (1, 2, 3):
                world.create(spec(n))
            world.delete("m-1")  # finished at once (delete_seconds 0)
            with psycopg.connect(url) as holder:  # another purge, mid-transaction
                holder.execute("SELECT 1 FROM sim_servers WHERE machine_id = 'm-1' FOR UPDATE")
                done = threading.Event()
                worker = threading.Thread(target=lambda: (world.delete("m-2"), done.set()))
                worker.start()
                worker.join(timeout=scaled(20))
                assert done.is_set(), "the delete waited for the other transaction's rows"
                assert world.user_data("m-1") == "#cloud-config 1"  # skipped, kept
                holder.rollback()
            world.delete("m-3")  # the next delete purges both finished ones
            assert world.user_data("m-1") is None and world.user_data("m-2") is None
            assert [s.machine_id for s in world.find({})] == []
        finally:
            world.close()
