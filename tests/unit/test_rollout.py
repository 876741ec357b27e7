"""The rollout planner (domain/rollout.py), stepped to the end on plain values: no
moment breaks the policy, only old nodes are retired, and it always finishes."""

from __future__ import annotations

import pytest

from shoal.domain import rollout
from shoal.domain.model import RolloutPolicy
from shoal.domain.rollout import Census, RolloutState
from shoal.services.rollouts import HOLDS


def simulate(old: int, desired: int, policy: RolloutPolicy, boot_passes: int = 1) -> list[Census]:
    """Step a rollout: new nodes become ready `boot_passes` passes after they are made,
    retired ones vanish at once. Every census seen, in order."""
    current: list[int] = []  # pass at which each new node is ready
    old_ready = old
    seen: list[Census] = []
    for tick in range(1, 200):
        ready_new = sum(1 for at in current if at <= tick)
        c = Census(len(current), ready_new, old_ready, old_ready)
        seen.append(c)
        if rollout.done(c, desired):
            return seen
        s = rollout.step(c, desired, policy)
        old_ready -= s.retire
        current += [tick + boot_passes] * s.create
    raise AssertionError("the rollout never finished")


@pytest.mark.parametrize(
    ("old", "desired", "surge", "unavailable"),
    [(4, 4, 1, 0), (4, 4, 0, 1), (4, 4, 2, 1), (5, 3, 1, 0), (3, 5, 1, 1), (1, 1, 1, 0)],
)
def test_a_rollout_keeps_its_policy_at_every_moment_and_finishes(
    old: int, desired: int, surge: int, unavailable: int
) -> None:
    policy = RolloutPolicy(max_surge=surge, max_unavailable=unavailable)
    for c in simulate(old, desired, policy, boot_passes=2):
        ready = c.current_ready + c.old_ready
        # Before the first step the group may be over or under its count (a resize
        # during the rollout); after it, the policy holds.
        assert c.total <= max(desired + surge, old)
        assert ready >= min(desired - unavailable, old)


def test_one_worker_unavailable_at_most_with_max_batch_size_one() -> None:
    policy = RolloutPolicy(max_surge=1, max_unavailable=1)
    for c in simulate(4, 4, policy, boot_passes=3)[1:]:
        assert 4 - (c.current_ready + c.old_ready) <= 1


def test_masters_go_one_at_a_time_whatever_their_policy() -> None:
    p = rollout.policy_for(RolloutPolicy(max_surge=5, max_unavailable=2), master=True)
    assert p == rollout.ONE_AT_A_TIME
    first = rollout.step(Census(0, 0, 3, 3), 3, p)
    assert (first.create, first.retire) == (1, 0)  # a new one first, no old one goes
    booting = rollout.step(Census(1, 0, 3, 3), 3, p)
    assert (booting.create, booting.retire) == (0, 0)  # wait until it is ready
    ready = rollout.step(Census(1, 1, 3, 3), 3, p)
    assert ready.retire == 1


def test_a_policy_that_cannot_progress_is_one_at_a_time() -> None:
    stuck = RolloutPolicy(max_surge=0, max_unavailable=0)
    assert rollout.policy_for(stuck, master=False) == rollout.ONE_AT_A_TIME


def test_shrinking_during_a_rollout_retires_old_nodes_never_new_ones() -> None:
    s = rollout.step(Census(2, 2, 3, 3), 2, RolloutPolicy(1, 0))
    assert s.retire == 3 and s.create == 0  # only the old go; the two new stay


def test_old_nodes_not_ready_cost_no_availability() -> None:
    # 4 old, 2 of them not ready; 2 desired: the 2 not ready can go (the caller picks
    # them first) and the 2 ready stay.
    s = rollout.step(Census(0, 0, 4, 2), 2, RolloutPolicy(max_surge=1, max_unavailable=0))
    assert (s.retire, s.create) == (2, 1)


def test_rollout_states_keep_their_stored_strings() -> None:
    """The holds a request stores (`rollout_hold`) are the states' plain strings: the
    spec column and the wire keep "paused" and "aborted"."""
    assert {s.value for s in RolloutState} == {
        "rolling",
        "waiting",
        "paused",
        "aborted",
        "stalled",
    }
    assert HOLDS == {"pause": "paused", "resume": None, "abort": "aborted"}
    assert all(type(h) is str for h in HOLDS.values() if h is not None)
    assert [s for s in RolloutState if s.holds_group] == [
        RolloutState.ROLLING,
        RolloutState.WAITING,
        RolloutState.PAUSED,
    ]


@pytest.mark.parametrize(
    ("state", "holds"),
    [(None, False), *((s, s is not RolloutState.ABORTED) for s in RolloutState)],
)
def test_a_rollout_decides_the_nodes_unless_there_is_none_or_it_was_aborted(
    state: RolloutState | None, holds: bool
) -> None:
    assert rollout.Standing(2, state, "").holds_scaling is holds
