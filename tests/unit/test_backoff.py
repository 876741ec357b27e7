"""Backoff with jitter and the rate limiter, on virtual time (instant)."""

from shoal.conductor.backoff import Backoff
from shoal.conductor.ratelimit import RateLimiter


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
