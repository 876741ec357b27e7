"""A token bucket per provider, shared by every thread of one conductor process.

`acquire()` blocks until a call may go; `hold(seconds)` makes every caller wait
(a 429 with Retry-After from the provider). The clock is injectable so tests
take no time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """At most `rate` calls per second with bursts of `burst`; rate 0 = unlimited."""

    def __init__(
        self,
        rate: float,
        burst: float | None = None,
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self._now = now
        self._sleep = sleep
        self._tokens = self.burst
        self._last = now()
        self._held_until = 0.0
        self._lock = threading.Lock()

    def _reserve(self) -> float:
        """Take a token (possibly in debt); return how long the caller must wait."""
        with self._lock:
            now = self._now()
            wait = max(0.0, self._held_until - now)
            if self.rate <= 0:
                return wait
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1.0
            if self._tokens < 0:
                wait = max(wait, -self._tokens / self.rate)
            return wait

    def acquire(self) -> float:
        """Wait until one call may go; return the seconds waited."""
        wait = self._reserve()
        if wait > 0:
            self._sleep(wait)
        return wait

    def hold(self, seconds: float) -> None:
        """Make every caller wait at least `seconds` from now (provider said Retry-After)."""
        with self._lock:
            self._held_until = max(self._held_until, self._now() + seconds)
