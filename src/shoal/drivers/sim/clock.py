"""Wall clocks for the sim: the real one, and a manual one so tests take no time.

The sim reads real (wall) seconds from a `Clock` and turns them into simulated
seconds itself (see `config.SimConfig.sim_now`), so that a change of time_scale
keeps simulated time continuous and every process on one world agrees.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Where the sim reads the time and waits: real seconds since the epoch."""

    def now(self) -> float:
        """Real seconds since the Unix epoch (shared by every process on the host)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` of real time (API latency)."""
        ...


class SystemClock:
    """The real clock: `time.time()` and `time.sleep()`."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to (or when something sleeps on it).

    `sleep` advances the time instead of waiting, so latency tests are instant.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.slept = 0.0  # total real seconds "slept", for latency tests

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                self._now += seconds
                self.slept += seconds

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds` real seconds."""
        with self._lock:
            self._now += seconds
