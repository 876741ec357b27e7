"""What every reconciler of one conductor process shares: database, driver, the
bounded pool of driver calls, the provider's rate limiter, backoff and clock."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from shoal.conductor.backoff import Backoff
from shoal.conductor.ratelimit import RateLimiter
from shoal.conductor.throttle import Throttle
from shoal.db.engine import Database
from shoal.drivers.contract import Driver, TransientError
from shoal.settings import ConductorSettings

T = TypeVar("T")


@dataclass
class Context:
    """Long-lived handles passed to every pass (no globals)."""

    db: Database
    driver: Driver
    settings: ConductorSettings
    pool: ThreadPoolExecutor
    limiter: RateLimiter
    backoff: Backoff
    now: Callable[[], datetime]
    holder: str  # this process's lease holder name; every pass's write is fenced by it
    # Creates: paced to the provider's limit as learned from its 429s.
    create_throttle: Throttle = field(default_factory=Throttle)

    def call(self, fn: Callable[[], T]) -> T:
        """One driver call through the rate limiter; a 429 hint holds every caller."""
        self.limiter.acquire()
        try:
            return fn()
        except TransientError as exc:
            if exc.retry_after:
                self.limiter.hold(exc.retry_after)
            raise

    def create(self, fn: Callable[[], T], max_refusals: int = 50) -> T:
        """A create call paced by `create_throttle`; a refusal with a retry-after
        hint (429) is retried after the hint instead of failing the pass."""
        refusals = 0
        while True:
            self.create_throttle.acquire()
            try:
                out = self.call(fn)
            except TransientError as exc:
                if exc.retry_after is None or refusals >= max_refusals:
                    raise
                refusals += 1
                self.create_throttle.refused(exc.retry_after)
                continue
            self.create_throttle.accepted()
            return out

    def requeue_at(self, now: datetime, seconds: float) -> datetime:
        """`now + seconds`, jittered by the backoff's jitter."""
        return now + timedelta(seconds=self.backoff.jittered(seconds))
