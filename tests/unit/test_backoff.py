"""Backoff with jitter and the rate limiter, on virtual time (instant)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from shoal.conductor.backoff import Backoff
from shoal.conductor.pacing import Pacing
from shoal.conductor.ratelimit import RateLimiter
from shoal.settings import ConductorSettings


def test_exponential_capped_and_jittered_within_bounds() -> None:
    b = Backoff(base=1, cap=10, jitter=0.2, rand=lambda: 0.5)
    assert [b.after_attempts(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 8, 10]
    lo = Backoff(base=1, cap=10, jitter=0.2, rand=lambda: 0.0)
    hi = Backoff(base=1, cap=10, jitter=0.2, rand=lambda: 1.0)
    assert lo.after_attempts(3) == 4 * 0.8 and hi.after_attempts(3) == 4 * 1.2


def test_waiting_backoff_grows_with_the_wait_and_honours_retry_after() -> None:
    b = Backoff(base=1, cap=30, jitter=0, rand=lambda: 0.5)
    assert b.after_waiting(0) == 1
    assert b.after_waiting(20) == 10
    assert b.after_waiting(1000) == 30
    assert b.after_waiting(0, retry_after=5) == 5


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_rate_limiter_spaces_calls() -> None:
    ft = FakeTime()
    rl = RateLimiter(10, burst=2, now=ft.now, sleep=ft.sleep)
    for _ in range(12):
        rl.acquire()
    # 2 in the burst, then 10 more at 10/s
    assert abs(ft.t - 1.0) < 1e-9


def test_unlimited_and_hold() -> None:
    ft = FakeTime()
    rl = RateLimiter(0, now=ft.now, sleep=ft.sleep)
    for _ in range(100):
        rl.acquire()
    assert ft.t == 0
    rl.hold(3)
    assert rl.acquire() == 3 and ft.t == 3


def test_pacing_bounds_the_phases_delays() -> None:
    t0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    settings = ConductorSettings(requeue_seconds=2.0, sweep_seconds=30.0, backoff_max_seconds=9.0)
    pace = Pacing.of(settings, Backoff(base=1.0, cap=60.0, rand=lambda: 0.5), lambda: t0)
    assert (pace.requeue_seconds, pace.sweep_seconds, pace.clock()) == (2.0, 30.0, t0)
    assert pace.progress_seconds == 0.2  # machines moving: faster than the period
    assert replace(pace, requeue_seconds=0.05).progress_seconds == 0.05  # never slower
    assert pace.at(t0, 3.0) == t0 + timedelta(seconds=3)  # no jitter from rand 0.5
    assert pace.after_waiting(100.0, None) == 9.0  # capped by backoff_max_seconds
    assert pace.after_waiting(4.0, None) == 2.0  # half the wait
    assert pace.after_waiting(4.0, 5.0) == 5.0  # the cloud's hint
    assert pace.after_attempts(3) == 4.0 and pace.after_attempts(10) == 9.0
