"""Even AZ spread and next-zone fallback (pure)."""

from collections import Counter

from shoal.domain import placement


def test_spread_is_even_from_empty() -> None:
    got = placement.spread(["az-1", "az-2", "az-3"], [], 7)
    assert Counter(got) == {"az-1": 3, "az-2": 2, "az-3": 2}
    assert got[:3] == ["az-1", "az-2", "az-3"]


def test_spread_fills_the_emptiest_zone_first() -> None:
    got = placement.spread(["az-1", "az-2", "az-3"], ["az-1", "az-1", "az-2"], 3)
    assert Counter(got) == {"az-3": 2, "az-2": 1}


def test_spread_ignores_nodes_outside_the_groups_zones() -> None:
    assert placement.spread(["az-1", "az-2"], ["az-9", "az-9"], 2) == ["az-1", "az-2"]


def test_no_zones_lets_the_cloud_choose() -> None:
    assert placement.spread([], ["az-1"], 2) == [None, None]


def test_fallback_takes_the_next_listed_zone_and_wraps() -> None:
    zones = ["az-1", "az-2", "az-3"]
    assert placement.fallback(zones, ["az-1"]) == "az-2"
    assert placement.fallback(zones, ["az-3"]) == "az-1"
    assert placement.fallback(zones, ["az-2", "az-3"]) == "az-1"
    assert placement.fallback(zones, ["az-1", "az-2", "az-3"]) is None
    assert placement.fallback([], ["az-1"]) is None
