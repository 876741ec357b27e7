"""A provider's recent boot and delete times (conductor/priors.py) on plain values:
kept by flavor, so that quick VMs and slow bare metal of one provider do not pace
each other's new groups."""

from __future__ import annotations

from shoal.conductor import pacing
from shoal.conductor.priors import MoveTimes


def test_nothing_seen_expects_nothing() -> None:
    assert MoveTimes().priors("m1.small") == (None, None)


def test_each_flavor_learns_its_own() -> None:
    times = MoveTimes()
    times.saw("vm", [20.0] * pacing.PRIOR_MIN, [5.0] * pacing.PRIOR_MIN)
    times.saw("metal", [600.0] * pacing.PRIOR_MIN, [])
    assert times.priors("vm") == (20.0, 5.0)
    assert times.priors("metal") == (600.0, None)
    assert times.priors("other") == (None, None)


def test_only_the_recent_window_counts() -> None:
    times = MoveTimes(window=pacing.PRIOR_MIN)
    times.saw(None, [100.0] * pacing.PRIOR_MIN, [])
    times.saw(None, [10.0] * pacing.PRIOR_MIN, [])  # the cloud got faster
    assert times.priors(None) == (10.0, None)


def test_a_clock_step_back_teaches_no_negative_time() -> None:
    times = MoveTimes()
    times.saw("vm", [-3.0] * pacing.PRIOR_MIN, [])
    assert times.priors("vm") == (0.0, None)
