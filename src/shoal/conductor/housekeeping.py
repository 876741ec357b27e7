"""Housekeeping of a conductor process, on two threads of its own: the heartbeat
(renew the leases held, report alive in `conductors`, count live peers, requeue
work whose generation moved without a due time), and the looks at the clouds:
every `provider_check_seconds` each provider (reachable or not, and what it
offers: what `GET /v1/providers` shows) and, every `sweep_seconds`, the orphan
sweeper. Apart, because a look calls the cloud and may take as long as its API
timeout: the heartbeat beside it never waits for it (a late heartbeat lets the
leases of passes under way expire, and peers count the process dead)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from shoal.conductor import sweeper
from shoal.conductor.claims import Claims
from shoal.conductor.context import Context, Provider
from shoal.conductor.pacing import heartbeat_period
from shoal.db import leases, providers, queue, registry
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
        self.sweeper = sweeper.Sweeper(ctx)
        self.last_check = float("-inf")

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
            registry.report_alive(s, self.host, now, self.period)
        self.claims.live = registry.live_conductors(self.ctx.db, now)
        if queue.requeue_unobserved(self.ctx.db, now):
            self.wake()

    def check_providers(self) -> None:
        """Look at every provider now and record what was seen (one row each)."""
        self.last_check = time.monotonic()
        for p in self.ctx.providers.values():
            providers.record(self.ctx.db, check(p, self.ctx.now(), self.host))

    def sweep(self) -> int:
        """Delete orphaned machines now; the number deleted."""
        self.last_sweep = time.monotonic()
        return self.sweeper.sweep()  # a provider it cannot list is skipped and said so

    def run(self, stop: threading.Event) -> None:
        """Heartbeat every period (the first at once: peers, and this process's own
        claims, count it now) until `stop` is set."""
        first = True
        while first or not stop.wait(self.period):
            first = False
            try:
                self.heartbeat()
            except Exception:
                log.exception("conductor heartbeat failed; continuing")

    def run_looks(self, stop: threading.Event) -> None:
        """Look at the providers (at once, then every `provider_check_seconds`) and
        sweep (a period after the start, then every `sweep_seconds`) until `stop` is
        set; whether one is due is asked every heartbeat period."""
        settings = self.ctx.settings
        first = True
        while first or not stop.wait(self.period):
            try:
                now = time.monotonic()
                if now - self.last_check >= settings.provider_check_seconds:
                    self.check_providers()
                if not first and now - self.last_sweep >= settings.sweep_seconds:
                    self.sweep()
            except Exception:
                log.exception("conductor housekeeping (provider checks, sweep) failed; continuing")
            first = False


def check(p: Provider, now: datetime, host: str) -> providers.Check:
    """One look at provider `p`: what it offers, or why it cannot be reached."""
    try:
        caps = p.driver.check()
    except DriverError as exc:
        return providers.Check(p.name, p.driver.name, False, exc.reason, {}, now, host)
    except Exception as exc:  # a driver bug: say so, do not stop the heartbeat
        log.exception("checking provider %s failed", p.name)
        why = f"checking it failed unexpectedly ({type(exc).__name__}: {exc})"
        return providers.Check(p.name, p.driver.name, False, why, {}, now, host)
    facts = {
        "availability_zones": list(caps.availability_zones),
        "flavors": list(caps.flavors),
        "flavor_sizes": {
            name: {"vcpus": f.vcpus, "ram_mb": f.ram_mb, "disk_gb": f.disk_gb}
            for name, f in caps.flavor_sizes.items()
        },
        "images": list(caps.images),
        "features": sorted(caps.features),
        # What the API checks a new group's provider options against (provider_options.py).
        "option_labels": dict(caps.option_labels),
        "option_choices": {k: list(v) for k, v in caps.option_choices.items()},
    }
    return providers.Check(p.name, p.driver.name, True, None, facts, now, host)
