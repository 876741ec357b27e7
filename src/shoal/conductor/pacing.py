"""When a pass wants its resources looked at again: a conductor's clock, periods and
backoff as one value, which the outcome phases take instead of the whole context
(`Context.pacing`), so their tests need no database, pool or providers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shoal.conductor.backoff import Backoff
from shoal.settings import ConductorSettings

PROGRESS_REQUEUE_S = 0.2  # a group whose machines are moving: looked at this often at most


@dataclass(frozen=True)
class Pacing:
    """The clock and the pacing policy of the passes of one conductor."""

    clock: Callable[[], datetime]
    backoff: Backoff
    requeue_seconds: float  # work under way, nothing predicted: looked at this often
    sweep_seconds: float  # at rest: a resync this often
    backoff_max_seconds: float  # no retry waits longer

    @classmethod
    def of(
        cls, settings: ConductorSettings, backoff: Backoff, clock: Callable[[], datetime]
    ) -> Pacing:
        return cls(
            clock,
            backoff,
            settings.requeue_seconds,
            settings.sweep_seconds,
            settings.backoff_max_seconds,
        )

    @property
    def progress_seconds(self) -> float:
        """The period of a group whose machines are moving (booting, being deleted)."""
        return min(self.requeue_seconds, PROGRESS_REQUEUE_S)

    def at(self, now: datetime, seconds: float) -> datetime:
        """`now + seconds`, jittered by the backoff's jitter."""
        return now + timedelta(seconds=self.backoff.jittered(seconds))

    def after_waiting(self, waited: float, retry_after: float | None) -> float:
        """Seconds before a resource refused for `waited` seconds tries again (at least
        the cloud's `retry_after`, at most `backoff_max_seconds`)."""
        return min(self.backoff.after_waiting(waited, retry_after), self.backoff_max_seconds)

    def after_attempts(self, attempts: int) -> float:
        """Seconds before attempt number `attempts` (1-based), at most `backoff_max_seconds`."""
        return min(self.backoff.after_attempts(attempts), self.backoff_max_seconds)
