"""Retry delays with jitter, from an injectable random source (tests are instant).

The conductor keeps no retry counter per resource: the delay grows with how
long the resource has been waiting (half the time since it was first blocked),
bounded by `base` and `cap`, so a restart neither resets nor loses the backoff.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Exponential-ish backoff with +/- `jitter` relative noise."""

    base: float = 1.0
    cap: float = 60.0
    jitter: float = 0.2
    rand: Callable[[], float] = field(default=random.random)

    def jittered(self, seconds: float) -> float:
        """`seconds` with +/- `jitter` relative noise."""
        return seconds * (1.0 + self.jitter * (2.0 * self.rand() - 1.0))

    def after_attempts(self, attempts: int) -> float:
        """Delay before retry number `attempts` (1-based): base * 2^(attempts-1), capped."""
        raw = self.base * (2.0 ** max(0, attempts - 1))
        return self.jittered(min(self.cap, raw))

    def after_waiting(self, waited_seconds: float, retry_after: float | None = None) -> float:
        """Delay for a resource that has waited `waited_seconds` already.

        Grows with the wait (half of it), between `base` and `cap`; never less
        than the provider's `retry_after` hint.
        """
        raw = min(self.cap, max(self.base, waited_seconds / 2.0))
        delay = self.jittered(raw)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return delay
