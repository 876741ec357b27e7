"""What one provider's machines took lately, as this process saw them, by flavor:
boots (create to ready) and deletes (marked to gone). A group that has learned
nothing of its own yet is paced by those of its flavor (`pacing.prior`): its first
look comes when such machines usually are done, not after a run of ever longer looks
from a fraction of a second on. By flavor, since a provider may serve both VMs that
boot in seconds and bare metal that boots in minutes. Kept in memory only: a new
process starts from nothing and learns from its first passes, as a group does."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

from shoal.conductor import pacing

FLAVORS_MAX = 1_000  # flavors remembered per provider (the oldest learned is forgotten)


class MoveTimes:
    """The recent boot and delete times (seconds) of one provider's machines, by flavor."""

    def __init__(self, window: int = pacing.PRIOR_WINDOW) -> None:
        self._lock = threading.Lock()
        self._window = window
        self._seen: dict[str, tuple[deque[float], deque[float]]] = {}

    def saw(self, flavor: str | None, boots: Iterable[float], deletes: Iterable[float]) -> None:
        boots, deletes = list(boots), list(deletes)
        if not boots and not deletes:
            return
        with self._lock:
            times = self._seen.get(flavor or "")
            if times is None:
                if len(self._seen) >= FLAVORS_MAX:
                    del self._seen[next(iter(self._seen))]
                times = (deque(maxlen=self._window), deque(maxlen=self._window))
                self._seen[flavor or ""] = times
            times[0].extend(max(0.0, b) for b in boots)
            times[1].extend(max(0.0, d) for d in deletes)

    def priors(self, flavor: str | None) -> tuple[float | None, float | None]:
        """(boot, delete) that a group of `flavor` with nothing learned expects (None:
        too few seen)."""
        with self._lock:
            times = self._seen.get(flavor or "")
            if times is None:
                return None, None
            return pacing.prior(times[0]), pacing.prior(times[1])
