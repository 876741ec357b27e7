"""Waits for convergence whose deadline follows progress, not a fixed wall time.

On a loaded machine (load 15 on 2 cores) a convergence that takes 20 s alone takes
minutes; a fixed timeout then fails a test that was making steady progress. `until`
polls `done()` and fails only when the observed state (`progress()`: any comparable
snapshot, e.g. node counts by state) has not changed for `idle` seconds, or after `cap`
seconds in all. `scaled` stretches a fixed timeout by the machine's load, for waits
that have nothing to observe but their condition.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

MAX_LOAD_FACTOR = 8.0


def load_factor() -> float:
    """How many times slower than idle this machine runs now: load per core, at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(MAX_LOAD_FACTOR, max(1.0, load / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    """`seconds` stretched by the machine's load (a fixed timeout, made load-aware)."""
    return seconds * load_factor()


def until(
    done: Callable[[], bool],
    *,
    progress: Callable[[], Any],
    what: str,
    idle: float = 60.0,
    cap: float = 900.0,
    interval: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    load: Callable[[], float] = load_factor,
) -> None:
    """Poll `done()` until true; fail when `progress()` stays the same `idle` seconds
    (stretched by the load) or after `cap` seconds in all."""
    start = clock()
    seen = progress()
    changed = start
    while not done():
        now = clock()
        current = progress()
        if current != seen:
            seen, changed = current, now
        stalled = now - changed
        assert stalled < idle * load(), (
            f"no progress for {stalled:.0f} s waiting for {what} (state: {seen!r})"
        )
        assert now - start < cap, f"{what}: still progressing but over {cap:.0f} s in all"
        sleep(interval)
