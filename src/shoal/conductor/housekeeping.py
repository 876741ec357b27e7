"""Housekeeping of a conductor process, on a thread of its own: the heartbeat (renew
the leases held, report alive in `conductors`, count live peers, requeue work
whose generation moved without a due time) and, every `sweep_seconds`, the
orphan sweeper."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from shoal.conductor import sweeper
from shoal.conductor.claims import Claims
from shoal.conductor.context import Context
from shoal.db import leases, queue, registry
from shoal.drivers.contract import DriverError

log = logging.getLogger(__name__)


class Housekeeping:
    """The heartbeat and the sweeper of one conductor process."""

    def __init__(self, ctx: Context, claims: Claims, host: str, wake: Callable[[], None]) -> None:
        self.ctx = ctx
        self.claims = claims
        self.host = host
        self.wake = wake
        self.last_sweep = 0.0

    @property
    def period(self) -> float:
        """Leases are renewed (and the process reported alive) this often."""
        return heartbeat_period(self.ctx.settings.lease_seconds)

    def heartbeat(self) -> None:
        """Renew the leases this process holds and report it alive."""
        now = self.ctx.now()
        with self.ctx.db.core_write() as s:
            leases.renew(
                s, self.ctx.holder, self.claims.held(), now, self.ctx.settings.lease_seconds
            )
            registry.report_alive(s, self.host, now)
        self.claims.live = registry.live_conductors(self.ctx.db, now - self.claims.alive_window)
        if queue.requeue_unobserved(self.ctx.db, now):
            self.wake()

    def sweep(self) -> int:
        """Delete orphaned machines now; the number deleted."""
        self.last_sweep = time.monotonic()
        try:
            return sweeper.sweep(self.ctx)
        except DriverError as exc:
            log.warning("sweeper: %s", exc.reason)
            return 0

    def run(self, stop: threading.Event) -> None:
        """Heartbeat every period (the first at once: peers, and this process's own
        claims, count it now) and sweep when due, until `stop` is set."""
        first = True
        while first or not stop.wait(self.period):
            try:
                self.heartbeat()
                due = time.monotonic() - self.last_sweep >= self.ctx.settings.sweep_seconds
                if not first and due:
                    self.sweep()
            except Exception:
                log.exception("conductor housekeeping failed; continuing")
            first = False


def heartbeat_period(lease_seconds: float) -> float:
    """A third of the lease: two heartbeats may be missed before a lease expires."""
    return max(0.2, lease_seconds / 3)
