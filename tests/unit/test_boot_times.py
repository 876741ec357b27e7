"""How long a boot took, on plain values (conductor/nodegroup/observe.py `ready_time`,
status.py `boot_time`): from the create the provider took to when it says the machine
was ready, each falling back to what the conductor itself saw."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shoal.conductor.nodegroup.observe import ready_time
from shoal.conductor.nodegroup.status import boot_time
from shoal.domain.model import Node, NodeState
from shoal.drivers.contract import Machine, MachineState

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(created: float, building: float | None, ready: float | None = None) -> Node:
    return Node(
        1, "u", "n", "c", "g", "p", NodeState.ACTIVE if ready is not None else NodeState.BUILDING,
        created_at=at(created), building_at=None if building is None else at(building),
        ready_at=None if ready is None else at(ready),
    )  # fmt: skip


def machine(ready: float | None) -> Machine:
    return Machine("u", "n", MachineState.ACTIVE, {}, ready_at=None if ready is None else at(ready))


@pytest.mark.parametrize(
    ("said", "created", "building", "seen", "expected"),
    [
        (12.0, 0.0, 10.0, 15.0, 12.0),  # the provider's time, between the create and the look
        (None, 0.0, 10.0, 15.0, 15.0),  # it says nothing: when the look saw it
        (16.0, 0.0, 10.0, 15.0, 15.0),  # after the look: another clock
        (9.0, 0.0, 10.0, 15.0, 15.0),  # before its create was taken: another clock
        (5.0, 0.0, None, 15.0, 5.0),  # no create time kept (an older row): after the row
        (-1.0, 0.0, None, 15.0, 15.0),
    ],
)
def test_ready_time(
    said: float | None, created: float, building: float | None, seen: float, expected: float
) -> None:
    assert ready_time(machine(said), node(created, building), at(seen)) == at(expected)


@pytest.mark.parametrize(
    ("created", "building", "ready", "expected"),
    [
        (0.0, 10.0, 30.0, 20.0),  # from the create the provider took, not the row before it
        (0.0, None, 30.0, 30.0),  # no create time kept: from the row
        (0.0, 10.0, None, None),  # not ready
        (0.0, 40.0, 30.0, None),  # ready before its latest build began (a replaced machine)
    ],
)
def test_boot_time(
    created: float, building: float | None, ready: float | None, expected: float | None
) -> None:
    assert boot_time(node(created, building, ready)) == expected
