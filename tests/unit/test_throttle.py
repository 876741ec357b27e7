"""The create throttle learns a provider's rate from its 429s, on virtual time."""

from __future__ import annotations

import random

import pytest

from shoal.conductor.throttle import Held, Throttle


class Cloud:
    """A token bucket like the sim's: `rate` creates/s, burst `burst` (default `rate`), 429."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = burst or rate
        self.t = 0.0
        self.tokens = self.burst
        self.at = 0.0
        self.accepted = 0
        self.refused = 0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s

    def create(self) -> float | None:
        """None when accepted, else the retry-after hint."""
        self.tokens = min(self.burst, self.tokens + (self.t - self.at) * self.rate)
        self.at = self.t
        if self.tokens >= 1:
            self.tokens -= 1
            self.accepted += 1
            return None
        self.refused += 1
        return (1 - self.tokens) / self.rate


def drive(cloud: Cloud, th: Throttle, creates: int) -> None:
    done = 0
    while done < creates:
        th.acquire()
        hint = cloud.create()
        if hint is None:
            th.accepted()
            done += 1
        else:
            th.refused(hint)
        cloud.t += 0.0001  # each call costs a little time


def test_unpaced_until_the_first_refusal() -> None:
    cloud = Cloud(rate=1000)
    th = Throttle(now=cloud.now, sleep=cloud.sleep)
    drive(cloud, th, 100)
    assert th.rate is None and cloud.refused == 0


def test_learns_the_rate_and_keeps_refusals_rare() -> None:
    cloud = Cloud(rate=5)
    th = Throttle(now=cloud.now, sleep=cloud.sleep)
    drive(cloud, th, 1000)
    lower_bound = (1000 - 5) / 5  # the burst, then 5 per second
    assert cloud.t <= lower_bound * 1.05
    assert cloud.refused < 1000 * 0.15  # not one refusal per accepted create
    assert th.rate is not None and 3 < th.rate < 8


def test_idle_gaps_and_bunched_refusals_do_not_lower_the_pace() -> None:
    """Waves of concurrent creates with pauses between them, the calls of a wave
    reaching the cloud slightly out of their slots (thread scheduling): the
    refusals this causes must not ratchet the pace down."""
    rng = random.Random(7)
    cloud = Cloud(rate=200, burst=2)
    th = Throttle(now=cloud.now, sleep=cloud.sleep)
    for _ in range(40):  # 40 waves of 25 creates, 0.1 s without demand between them
        cloud.t += 0.1
        todo = 25
        while todo:
            slots = []
            for _ in range(todo):
                th.acquire()
                slots.append(cloud.t)
            end = cloud.t
            done = 0
            for at in sorted(s + rng.uniform(0, 0.01) for s in slots):
                cloud.t = at
                hint = cloud.create()
                if hint is None:
                    th.accepted()
                    done += 1
                else:
                    th.refused(hint)
            cloud.t = max(cloud.t, end)
            todo -= done
    assert th.rate is not None and th.rate > 200 * 0.7


def test_late_wakeups_neither_bunch_calls_nor_ratchet_the_pace() -> None:
    """A bucket of one token and callers woken up to 30 % of a slot late (GIL,
    scheduler): each call goes one slot after the previous one really went, so
    a late caller is not followed by an early one, and the pace stays near the
    provider's rate instead of stepping down on every refusal."""
    rng = random.Random(3)
    cloud = Cloud(rate=100, burst=1)

    def late_sleep(s: float) -> None:
        cloud.t += s + rng.uniform(0, 0.003)

    th = Throttle(now=cloud.now, sleep=late_sleep)
    drive(cloud, th, 2000)
    assert cloud.refused < 2000 * 0.1
    assert th.rate is not None and th.rate > 100 * 0.85
    assert cloud.t <= 2000 / 100 * 1.2


def test_after_a_stall_the_pace_spends_the_providers_burst() -> None:
    """A provider with a burst of 10 tokens, callers now and then held up for
    several slots (a long pass holding the interpreter): the pace, probing above
    the provider's rate between refusals, spends the tokens a stall let pile up
    instead of losing them, and refusals stay rare."""
    rng = random.Random(11)
    cloud = Cloud(rate=100, burst=10)

    def stalling_sleep(s: float) -> None:
        cloud.t += s + (rng.uniform(0.02, 0.05) if rng.random() < 0.05 else 0.0)

    th = Throttle(now=cloud.now, sleep=stalling_sleep)
    drive(cloud, th, 3000)
    bound = (3000 - 10) / 100
    assert cloud.t <= bound * 1.04, cloud.t / bound
    assert cloud.refused < 3000 * 0.1


@pytest.mark.parametrize(
    ("hold", "max_wait", "waits"),
    [
        (0.5, 1.0, True),  # the slot comes within what the caller waits: it waits
        (3.0, 1.0, False),  # further: Held says when, nothing slept
        (3.0, None, True),  # no bound: it waits (the throttle's own callers)
    ],
)
def test_a_caller_waits_no_longer_than_it_says(
    hold: float, max_wait: float | None, waits: bool
) -> None:
    cloud = Cloud(10.0)
    th = Throttle(now=cloud.now, sleep=cloud.sleep)
    th.refused(hold)
    assert th.free_in() == pytest.approx(hold)
    if waits:
        assert th.acquire(max_wait) == pytest.approx(hold)
        assert cloud.t == pytest.approx(hold)
    else:
        with pytest.raises(Held) as held:
            th.acquire(max_wait)
        assert held.value.seconds == pytest.approx(hold) and cloud.t == 0.0
