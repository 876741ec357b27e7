"""A heat group's servers while Heat works on its stack (drivers/heat/servers.py): read
again only after STALE_S; fresh when the stack rests; forgotten on a write. Nova is a
counting function, time a list the test moves."""

from __future__ import annotations

from typing import Any

from shoal.drivers.heat.servers import STALE_S, ServerReads

GROUP = ["shoal-deployment=d", "shoal-nodegroup=g1"]
OTHER = ["shoal-deployment=d", "shoal-nodegroup=g2"]


class Nova:
    def __init__(self) -> None:
        self.calls = 0

    def servers(self, tags: list[str]) -> list[dict[str, Any]]:
        self.calls += 1
        return [{"id": f"s{self.calls}", "tags": list(tags)}]


def reads() -> tuple[Nova, list[float], ServerReads]:
    nova, now = Nova(), [100.0]
    return nova, now, ServerReads(nova.servers, clock=lambda: now[0])


def test_a_working_stack_reads_nova_again_only_after_stale_s() -> None:
    nova, now, r = reads()
    first = r.read(GROUP, working=True)
    now[0] += STALE_S - 0.1
    assert r.read(GROUP, working=True) == first and nova.calls == 1
    now[0] += 0.2
    assert r.read(GROUP, working=True) != first and nova.calls == 2


def test_a_resting_stack_always_reads_nova() -> None:
    nova, now, r = reads()
    r.read(GROUP, working=True)
    r.read(GROUP, working=False)  # Heat is done: the listing that says so is fresh
    r.read(GROUP, working=True)  # and nothing is kept from before it
    assert nova.calls == 3


def test_a_write_forgets_that_group_only() -> None:
    nova, now, r = reads()
    r.read(GROUP, working=True)
    r.read(OTHER, working=True)
    r.forget("shoal-nodegroup=g1")
    r.read(GROUP, working=True)
    r.read(OTHER, working=True)
    assert nova.calls == 3  # g1 read again, g2 still kept


def test_groups_are_kept_apart() -> None:
    nova, now, r = reads()
    a, b = r.read(GROUP, working=True), r.read(OTHER, working=True)
    assert a != b and nova.calls == 2
    assert r.read(GROUP, working=True) == a and r.read(OTHER, working=True) == b
