"""The heat benchmark's rounds (benchmarks/heat.py), on plain values: the sides run
forward then backward, each side's phases are averaged over its rounds, and each
round's ratio is kept beside the mean's."""

from __future__ import annotations

import pytest
from benchmarks.heat import Walls, mean, order, per_round, rows_of


@pytest.mark.parametrize(
    ("sides", "rounds", "want"),
    [
        ("abc", 1, [(0, "a"), (0, "b"), (0, "c")]),
        ("abc", 2, [(0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a")]),
        ("ab", 3, [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]),
        ("b", 2, [(0, "b"), (1, "b")]),
    ],
)
def test_the_sides_alternate_direction_by_round(
    sides: str, rounds: int, want: list[tuple[int, str]]
) -> None:
    assert order(sides, rounds) == want


def test_each_phase_is_averaged_over_the_rounds_that_measured_it() -> None:
    runs = [Walls(create=10.0, grow=4.0), Walls(create=20.0)]
    assert mean(runs) == {"create": 15.0, "grow": 4.0}
    assert mean([]) == {}


def test_each_rounds_ratio_and_the_means() -> None:
    a = [Walls(create=100.0, delete=30.0), Walls(create=120.0, delete=30.0)]
    b = [Walls(create=125.0, delete=33.0), Walls(create=117.0, delete=30.0)]
    assert per_round(b, a, "create") == [1.25, 0.975]
    rows = {r.scenario: r for r in rows_of({"a": a, "b": b, "c": []})}
    create = rows["heat (b) shoal heat create"]
    assert create.wall_s == 121.0 and create.lower_bound_s == 110.0
    assert create.ok is True and "b/a by round 1.25, 0.97" in create.note  # 121/110 = 1.1
    delete = rows["heat (b) shoal heat delete"]
    assert delete.ok is False  # 31.5 / 30 > 1.0
    assert "heat (c) shoal openstack create" not in rows
