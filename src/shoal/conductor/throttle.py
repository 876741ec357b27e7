"""Pace creates to the provider's rate limit, learned from its 429s.

A cloud that limits creates answers "429 Too Many Requests, retry after r".
Hammering it wastes calls; backing off whole passes wastes time. The throttle
keeps the provider just saturated instead: after a refusal it holds every
caller until the provider's hint and from then on paces calls one at a time at
a pace learned from the refusals (see `refused`). Until the first refusal it does
not pace at all. The clock is injectable so tests take no time.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable

WINDOW = 32  # recent accepted calls the pace is learned from
PROBE = 1.002  # pace growth per accepted call between refusals
SETTLE = 8  # accepted calls after a pace change before a refusal may lower it again
STEP = 0.05  # a refusal on schedule lowers the pace by this fraction
IDLE_GAP = 2.0  # a gap longer than this many paced slots was idle time, not the limit


class Held(Exception):
    """The next slot is further than the caller would wait: `seconds` from now."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"held for {seconds:.3g} s")
        self.seconds = seconds


class Throttle:
    """A learned pace for one kind of provider call, shared by every thread."""

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._now = now
        self._sleep = sleep
        self._lock = threading.Lock()
        self._accepted: deque[float] = deque(maxlen=WINDOW)
        self._turn = threading.Lock()  # held by the caller waiting for the next slot
        self._held_until = 0.0
        self.rate: float | None = None  # calls per second; None = not learned yet
        self.refusals = 0
        self._last_start = float("-inf")  # when the latest call really went
        self._since_change = 0  # accepted calls since the pace was last lowered

    def acquire(self, max_wait: float | None = None) -> float:
        """Wait for this call's slot; return the seconds waited. `max_wait`: a slot
        further than that is not waited for: `Held` says when it comes instead.

        Callers pass one at a time, each one slot after the previous call really
        went: a caller woken late delays the next instead of bunching with it
        (a provider's bucket of one or two tokens refuses bunched calls)."""
        waited = 0.0
        with self._turn:
            while True:
                with self._lock:
                    now = self._now()
                    wait = self._next_slot(now) - now
                    if wait <= 0:
                        self._last_start = now
                        return waited
                if max_wait is not None and waited + wait > max_wait:
                    raise Held(wait)
                self._sleep(wait)
                waited += wait

    def free_in(self) -> float:
        """Seconds until the next slot (0: now)."""
        with self._lock:
            now = self._now()
            return max(0.0, self._next_slot(now) - now)

    def _next_slot(self, now: float) -> float:
        at = max(now, self._held_until)
        if self.rate is not None:
            at = max(at, self._last_start + 1.0 / self.rate)
        return at

    def accepted(self) -> None:
        """The provider took a call: remember when, and probe a little faster."""
        with self._lock:
            self._accepted.append(self._now())
            self._since_change += 1
            if self.rate is not None:
                self.rate *= PROBE

    def refused(self, retry_after: float) -> None:
        """The provider refused a call (429): hold everyone until its hint, and pace.

        The first refusal sets the pace to the rate at which the provider
        accepted the calls before it (idle gaps left out). After that a refusal
        lowers the pace by STEP, at most once per SETTLE accepted calls (the
        calls in flight when the provider saturates are refused together), and
        every accepted call probes upwards: the pace settles just above the
        limit, where the provider takes its full rate and a refused call only
        retries at the next slot, instead of ratcheting down on thread jitter
        or on lulls in demand as a re-measured rate did.
        """
        with self._lock:
            now = self._now()
            self.refusals += 1
            self._held_until = max(self._held_until, now + retry_after)
            # A token bucket's hint is at most one token period: 1 / hint is
            # never below its rate, and bounds what a burst made us measure.
            ceiling = 1.0 / retry_after if retry_after > 0 else None
            if self.rate is not None:
                if self._since_change < SETTLE:
                    return  # the same saturation as the refusal that set this pace
                # Over the limit: step down a little. Paced just above the limit, the
                # provider takes its full rate (a refused call only retries at the
                # next slot); below it, every missed slot is lost. Measuring the
                # accepted rate instead would count the caller's own lulls.
                self._since_change = 0
                self.rate *= 1.0 - STEP
                return
            self._since_change = 0
            measured = self._measured(now, max(1.0, WINDOW * retry_after))
            if measured is not None:
                self.rate = measured
                if ceiling is not None:
                    self.rate = min(self.rate, ceiling)
            elif ceiling is not None:
                self.rate = ceiling

    def _measured(self, now: float, horizon: float) -> float | None:
        """Accepted calls per second over the recent window, if it says anything."""
        recent = [t for t in self._accepted if now - t <= horizon]
        if len(recent) < 2:
            return None
        gaps = [b - a for a, b in zip(recent, recent[1:], strict=False)]
        # Before a pace is learned, the median gap stands for one slot: the
        # pauses between one pass's waves and the next are idle, not the limit.
        cap = IDLE_GAP / self.rate if self.rate else IDLE_GAP * statistics.median(gaps)
        span = sum(min(g, cap) for g in gaps)
        return (len(recent) - 1) / span if span > 0 else None
