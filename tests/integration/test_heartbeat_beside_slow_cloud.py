"""A conductor's heartbeat never waits for a cloud: while a provider check hangs (a
cloud's API answering at its timeout), the process keeps reporting alive and renewing
its leases. Real conductor threads, real database (SQLite), the sim cloud whose
check blocks until the test lets it go (a slow cloud, not a stand-in for shoal)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from shoal.db import registry
from shoal.db.engine import Database
from shoal.drivers.contract import Capabilities
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.world import SimWorld
from shoal.settings import ConductorSettings
from tests.integration.conductor_support import env_at

HANG_MAX_S = 60.0  # the check gives up by itself after this (the test never waits that long)


class HangingCheck(SimDriver):
    """The sim, whose provider check hangs until `released` (as a cloud at its API
    timeout would), saying when one is under way."""

    def __init__(self, world: SimWorld, entered: threading.Event, released: threading.Event):
        super().__init__(world)
        self.entered, self.released = entered, released

    def check(self) -> Capabilities:
        self.entered.set()
        self.released.wait(HANG_MAX_S)
        return super().check()


def last_report(db: Database, host: str) -> datetime | None:
    seen = registry.live_processes(db, datetime(2000, 1, 1, tzinfo=UTC))
    return next((at for h, _, at in seen if h == host), None)


def test_the_heartbeat_goes_on_while_a_provider_check_hangs(tmp_path: Path) -> None:
    entered, released = threading.Event(), threading.Event()
    settings = ConductorSettings(requeue_seconds=0.05, lease_seconds=1.5)  # a beat each 0.5 s
    url = f"sqlite:///{tmp_path / 'shoal.db'}"
    with env_at(url, settings, driver=lambda w: HangingCheck(w, entered, released)) as env:
        host = env.conductor.host
        try:
            env.conductor.start()  # the first provider check starts at once, and hangs
            assert entered.wait(30), "no provider check started"
            first = None
            deadline = time.monotonic() + 30
            while first is None and time.monotonic() < deadline:
                first = last_report(env.db, host)
                time.sleep(0.05)
            assert first is not None, "the conductor never reported alive"
            later = first
            while later == first and time.monotonic() < deadline:
                time.sleep(0.05)
                later = last_report(env.db, host) or first
            # Reported again while the check still hangs: the heartbeat did not wait for it.
            assert not released.is_set()
            assert later > first, "no heartbeat while the provider check hung"
        finally:
            released.set()
