"""The pacing rules (conductor/pacing.py) on plain values: how often a group whose
machines move is looked at, the provider's floor, what a delete teaches, what a
group with nothing learned expects from its provider, and the heartbeat rule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shoal.conductor import pacing
from shoal.conductor.pacing import Moving, moving_period
from shoal.domain import fleet

FAST, CLOUD, METAL = 0.2, 1.0, 30.0  # floors: the sim, Nova, bare metal


@pytest.mark.parametrize(
    ("moves", "floor", "period"),
    [
        ([], FAST, FAST),  # nothing moving: the floor
        ([Moving(0.0)], FAST, FAST),  # just started, nothing learned: the floor
        ([Moving(0.0)], METAL, METAL),  # ... a slow provider's floor
        ([Moving(4.0)], FAST, 1.0),  # nothing learned: a quarter of the time so far
        ([Moving(60.0)], FAST, 15.0),
        ([Moving(1000.0)], FAST, 30.0),  # never beyond the cap
        ([Moving(1000.0)], 45.0, 45.0),  # ... unless the floor is above it
        ([Moving(2.0, learned=10.0)], FAST, 8.0),  # learned: when the first is due
        ([Moving(9.9, learned=10.0)], FAST, FAST),  # due in 0.1 s: the floor
        ([Moving(9.9, learned=10.0)], CLOUD, CLOUD),
        ([Moving(10.0, learned=10.0)], FAST, FAST),  # due now: the floor
        ([Moving(12.0, learned=10.0)], FAST, 0.5),  # late: a quarter of how late
        ([Moving(20.0, learned=10.0)], FAST, 2.5),
        ([Moving(20.0, learned=10.0)], CLOUD, 2.5),
        ([Moving(1.0, learned=100.0)], FAST, 30.0),  # due far ahead: the cap
        ([Moving(1.0, learned=0.1)], FAST, 0.225),  # late on a fast cloud
        ([Moving(1.0, learned=0.1)], CLOUD, CLOUD),
        ([Moving(0.0, learned=100.0), Moving(4.0)], FAST, 1.0),  # the soonest of both
        ([Moving(-5.0)], FAST, FAST),  # a clock step back counts as just started
    ],
)
def test_moving_period(moves: list[Moving], floor: float, period: float) -> None:
    assert moving_period(moves, floor) == pytest.approx(period)


def test_a_delete_is_never_relisted_at_the_fast_floor_for_long() -> None:
    """A 3-minute delete, nothing learned, looked at as the rule says: a handful of
    listings (not one every 0.2 s: 900)."""
    t, looks = 0.0, 0
    while t < 180.0:
        t += moving_period([Moving(t)], FAST)
        looks += 1
    assert looks < 40, looks


def _looks(boot_s: float, learned: float | None) -> int:
    """How many looks a group takes to see a boot of `boot_s` end, as the rule says."""
    t, looks = 0.0, 0
    while t < boot_s:
        t += moving_period([Moving(t, learned)], FAST)
        looks += 1
    return looks


def test_a_prior_turns_a_boots_many_looks_into_a_few() -> None:
    """20 s boots on a fast cloud: 19 looks with nothing learned; with the provider's
    prior of 19.5 s, one to when it expects them and then the floor's few."""
    assert _looks(20.0, None) == 19
    assert _looks(20.0, 19.5) == 4


@pytest.mark.parametrize(
    ("recent", "expected"),
    [
        ([], None),  # nothing seen
        ([20.0] * (pacing.PRIOR_MIN - 1), None),  # too few
        ([20.0] * pacing.PRIOR_MIN, 20.0),
        ([float(s) for s in range(10, 30)], 11.0),  # the low quantile, not the median
        ([5.0] + [60.0] * 19, 60.0),  # one quick outlier does not set it
        ([5.0, 6.0] + [60.0] * 8, 5.0),  # ... a tenth of them do
    ],
)
def test_prior(recent: list[float], expected: float | None) -> None:
    assert pacing.prior(recent) == expected


@pytest.mark.parametrize(
    ("before", "seen", "after"),
    [
        (None, 12.0, 12.0),  # the first one, as it is
        (10.0, 20.0, 13.0),  # a moving average
        (10.0, 10.0, 10.0),
        (None, -1.0, 0.0),  # a clock step back: no negative time
    ],
)
def test_learned(before: float | None, seen: float, after: float) -> None:
    assert pacing.learned(before, seen) == pytest.approx(after)


@pytest.mark.parametrize(
    ("declared", "requeue", "floor"),
    [
        (None, 2.0, 0.2),  # a fast cloud: the conductor's moving floor
        (None, 0.05, 0.05),  # never slower than the requeue period (tests)
        (0.01, 2.0, 0.2),  # a driver cannot ask for more than the conductor's floor
        (1.0, 2.0, 1.0),  # Nova
        (60.0, 2.0, 60.0),  # bare metal: minutes
        (1.0, 0.05, 1.0),  # the driver's pace holds with a short requeue period too
    ],
)
def test_floor_of(declared: float | None, requeue: float, floor: float) -> None:
    assert pacing.floor_of(declared, requeue) == floor


@pytest.mark.parametrize(
    ("lease", "period", "window"),
    [
        (15.0, 5.0, 15.0),  # a third of the lease; up for three beats
        (0.3, 0.2, 0.6),  # never more often than HEARTBEAT_MIN_S
        (60.0, 20.0, 60.0),
    ],
)
def test_heartbeat(lease: float, period: float, window: float) -> None:
    assert pacing.heartbeat_period(lease) == pytest.approx(period)
    seen = datetime(2026, 1, 1, tzinfo=UTC)
    until = fleet.up_until(seen, pacing.heartbeat_period(lease))
    assert (until - seen).total_seconds() == pytest.approx(window)
