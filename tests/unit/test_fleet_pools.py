"""The fleet benchmark's pool sizes (benchmarks/fleet.py: pools): its processes stay under
the server's max_connections, whatever the server's size and what others hold."""

from __future__ import annotations

import pytest
from benchmarks.fleet import PG_SPARE, pools

# (max_connections, held by others, shoal processes) -> (per shoal process, per sim child)
CASES = [
    ((100, 5, 6), (9, 4)),  # the default server, 2 APIs + 4 conductors
    ((100, 0, 3), (25, 4)),  # 2 APIs + 1 conductor
    ((300, 5, 6), (42, 4)),
    ((40, 20, 6), (2, 4)),  # no room: the floor, the run then waits more
]


@pytest.mark.parametrize(("given", "want"), CASES)
def test_pools_fit_the_servers_room(given: tuple[int, int, int], want: tuple[int, int]) -> None:
    most, used, processes = given
    assert pools(most, used, processes) == want
    shoal, sim = want
    if shoal > 2:  # above the floor: every process's pool, LISTEN and sim child fit
        assert processes * (shoal + 1 + sim) + used + PG_SPARE <= most
