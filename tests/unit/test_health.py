"""Failing machines as pure decisions (domain/health.py), with the conductor's delays
(conductor/pacing.py, `HEALTH`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from shoal.conductor import pacing
from shoal.domain import health
from shoal.domain.health import GroupMemory

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
DELAYS = pacing.HEALTH


def test_failure_delays_grow_and_are_capped() -> None:
    delays = [health.failure_delay(n, DELAYS) for n in range(0, 12)]
    assert delays[:6] == [0.0, 3.0, 6.0, 12.0, 24.0, 48.0]
    assert delays[-1] == DELAYS.max_retry_s
    # Five rounds fit in the first minute, not six: 3 + 6 + 12 + 24 < 60 < ... + 48.
    assert sum(delays[1:5]) < 60 < sum(delays[1:6])


def test_rounds_of_failures_and_recovery() -> None:
    mem = health.failed(GroupMemory(), T0, "Build of instance aborted" + "x" * 1000, 1, DELAYS)
    assert mem.failures == 1 and mem.last_fault is not None
    assert len(mem.last_fault) == health.FAULT_MAX
    assert health.retry_at(mem, DELAYS) == T0 + timedelta(seconds=3)
    mem = health.failed(mem, T0 + timedelta(seconds=4), "again", 1, DELAYS)
    assert health.for_generation(mem, 1) is mem
    assert health.for_generation(mem, 2).failures == 0  # a new request tries at once
    assert health.retry_at(mem, DELAYS) == T0 + timedelta(seconds=4 + 6)
    back = health.recovered(mem)
    assert (back.failures, back.last_fault, health.retry_at(back, DELAYS)) == (0, None, None)
    assert health.recovered(back) is back


@pytest.mark.parametrize(
    ("seen_after_s", "rounds", "retry_after_s"),
    [
        ((0,), 1, 3),  # the first failure: one round, 3 s
        ((0, 1, 2), 1, 3),  # one round's machines failing over three passes: still one
        ((0, 3), 2, 3 + 6),  # at the retry: the replacements' failure is a new round
        ((0, 1, 4, 5, 9), 2, 4 + 6),  # two rounds, each seen over two passes
        ((0, 4, 11, 24), 4, 24 + 24),  # each round seen once, as the delays allow
    ],
)
def test_failures_before_the_next_replacement_are_the_same_round(
    seen_after_s: tuple[int, ...], rounds: int, retry_after_s: int
) -> None:
    mem = GroupMemory()
    for s in seen_after_s:
        mem = health.failed(mem, T0 + timedelta(seconds=s), f"fault at {s}", 1, DELAYS)
    assert mem.failures == rounds
    assert mem.last_fault == f"fault at {seen_after_s[-1]}"
    assert health.retry_at(mem, DELAYS) == T0 + timedelta(seconds=retry_after_s)


def test_a_failure_under_a_new_desired_state_starts_a_round_at_once() -> None:
    mem = health.failed(GroupMemory(), T0, "old spec", 1, DELAYS)
    mem = health.failed(mem, T0 + timedelta(seconds=1), "new spec", 2, DELAYS)
    assert (mem.failures, mem.generation, mem.last_fault) == (2, 2, "new spec")


def test_zone_blocks_expire() -> None:
    mem = health.block_zone(GroupMemory(), "az-1", T0, DELAYS)
    assert health.open_zones(["az-1", "az-2"], mem, T0) == ["az-2"]
    assert health.blocked_zones(mem, T0) == ["az-1"]
    later = T0 + timedelta(seconds=DELAYS.zone_block_s + 1)
    assert health.open_zones(["az-1", "az-2"], mem, later) == ["az-1", "az-2"]
    assert health.expire_blocks(mem, later).zone_blocks == {}
    assert health.expire_blocks(mem, T0) is mem


def test_memory_round_trips_through_json() -> None:
    mem = health.block_zone(health.failed(GroupMemory(), T0, "boom", 3, DELAYS), "az-2", T0, DELAYS)
    assert GroupMemory.from_json(mem.to_json()) == mem
    assert GroupMemory.from_json(None) == GroupMemory()


# (unhealthy, desired, max_unhealthy_percent) -> repairs allowed
BREAKER = [
    (0, 3, 0, True),  # nothing unhealthy
    (1, 3, 40, True),  # 33 %
    (2, 3, 40, False),  # 67 %
    (2, 5, 40, True),  # exactly 40 %
    (3, 5, 40, False),
    (4, 10, 40, True),
    (5, 10, 40, False),
    # The floor of one: the first unhealthy node of any group is repaired.
    (1, 1, 40, True),  # a group of one
    (1, 2, 40, True),  # 50 % of two, but the first
    (2, 2, 40, False),  # both: the breaker trips
    (1, 2, 0, True),  # even at 0 %
    (2, 100, 0, False),
    (1, 0, 40, True),  # scaled to zero: its one node is not left broken
    (2, 2, 100, True),
]


@pytest.mark.parametrize(("unhealthy", "desired", "percent", "allowed"), BREAKER)
def test_repairs_stop_past_max_unhealthy_percent_with_a_floor_of_one(
    unhealthy: int, desired: int, percent: int, allowed: bool
) -> None:
    assert health.repairs_allowed(unhealthy, desired, percent) is allowed


@pytest.mark.parametrize(
    ("desired", "percent", "at_most"),
    [(1, 40, 1), (2, 40, 1), (3, 40, 1), (5, 40, 2), (7, 40, 2), (10, 40, 4), (3, 100, 3),
     (0, 40, 1), (50, 0, 1)],
)  # fmt: skip
def test_unhealthy_allowed_is_the_percentage_rounded_down_but_at_least_one(
    desired: int, percent: int, at_most: int
) -> None:
    assert health.unhealthy_allowed(desired, percent) == at_most


def test_the_repair_ladder_is_reboot_rebuild_replace_skipping_what_cannot_be_done() -> None:
    assert health.next_rung(0, True, True, True) == health.REBOOT
    assert health.next_rung(1, True, True, True) == health.REBUILD
    assert health.next_rung(2, True, True, True) == health.REPLACE
    assert health.next_rung(0, True, False, True) == health.REBUILD  # cannot reboot
    assert health.next_rung(0, True, False, False) == health.REPLACE
    assert health.next_rung(0, False, True, True) == health.REPLACE  # no machine left
    # a VM whose virt host is down fails over at once, whatever rung it was on
    assert health.next_rung(0, True, True, True, host_up=False) == health.REPLACE
    assert health.next_rung(1, True, True, True, host_up=False) == health.REPLACE


def test_failing_listings_are_counted_from_the_first_and_forgotten_once_one_works() -> None:
    mem = health.listing_failed(GroupMemory(), T0)
    mem = health.listing_failed(mem, T0 + timedelta(seconds=7))
    assert (mem.listing_failures, mem.listing_failing_since) == (2, T0)
    assert GroupMemory.from_json(mem.to_json()) == mem
    back = health.listed(mem)
    assert (back.listing_failures, back.listing_failing_since) == (0, None)
    assert health.listed(back) is back


@pytest.mark.parametrize(
    ("failures", "since", "says"),
    [
        (1, T0, "cannot list the machines of provider east: HTTP 503 (since 12:00 UTC, 1 attempt)"),
        (4, T0 + timedelta(minutes=75), "(since 13:15 UTC, 4 attempts)"),
        (2, datetime(2026, 11, 24, 14, 5, tzinfo=timezone(timedelta(hours=2))), "since 12:05 UTC"),
    ],
)
def test_the_reason_of_failing_listings_says_since_when_and_how_many_times(
    failures: int, since: datetime, says: str
) -> None:
    mem = GroupMemory(listing_failures=failures, listing_failing_since=since)
    text = health.listing_reason("east", "HTTP 503", mem)
    assert says in text and "check that the provider answers" in text
