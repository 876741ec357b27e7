"""tests/support/waiting.until: a deadline that moves with progress, under a cap."""

from __future__ import annotations

import pytest

from tests.support.waiting import until


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize(
    ("states", "done_at", "idle", "cap", "load", "passes"),
    [
        # a state that changes every 10 s converges at 100 s although idle is 30 s
        (lambda t: int(t // 10), 100.0, 30.0, 900.0, 1.0, True),
        # a state that never changes fails after idle, long before done
        (lambda t: 0, 100.0, 30.0, 900.0, 1.0, False),
        # ... unless the machine is 4 times as loaded: idle stretches to 120 s
        (lambda t: 0, 100.0, 30.0, 900.0, 4.0, True),
        # progress that stops at 50 s fails at 80 s, before done at 100 s
        (lambda t: min(int(t // 10), 5), 100.0, 30.0, 900.0, 1.0, False),
        # progress forever but past the cap fails
        (lambda t: int(t), 1000.0, 30.0, 200.0, 1.0, False),
        # done at once needs no progress at all
        (lambda t: 0, 0.0, 1.0, 1.0, 1.0, True),
    ],
)
def test_until_follows_progress_under_a_cap(
    states: object, done_at: float, idle: float, cap: float, load: float, passes: bool
) -> None:
    t = FakeTime()
    state = states  # type: ignore[assignment]

    def run() -> None:
        until(
            lambda: t.now >= done_at,
            progress=lambda: state(t.now),  # type: ignore[operator]
            what="x",
            idle=idle,
            cap=cap,
            interval=1.0,
            clock=t.clock,
            sleep=t.sleep,
            load=lambda: load,
        )

    if passes:
        run()
    else:
        with pytest.raises(AssertionError):
            run()
