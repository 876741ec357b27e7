"""Slow deletes are paced by the pacing rule (conductor/pacing.py), not re-listed at the
fast floor: a real conductor steps (`run_once`, which runs only what is due) over a sim
whose machines take seconds to be deleted, and the driver's listings of each group are
counted. A scale-down teaches the group its delete time (its memory)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from shoal.db import snapshots
from tests.integration.conductor_support import FAST_SIM, CountingSim, Env, make_env
from tests.support.waiting import scaled

DELETE_S = 6.0  # each machine takes this long (+-20 %) to be deleted
MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "flavor_id": "m1.small", "node_count": 3}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    sim = replace(FAST_SIM, delete_seconds=DELETE_S)
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}", sim=sim, driver=CountingSim)


def driver(env: Env) -> CountingSim:
    p = env.conductor.ctx.provider(None)
    assert p is not None and isinstance(p.driver, CountingSim)
    return p.driver


def step(env: Env, done: object, bound: float) -> float:
    """run_once until `done()` (a callable); the real seconds it took."""
    start = time.monotonic()
    deadline = start + scaled(bound)
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the conductor did not converge in time"
        env.conductor.run_once()
        time.sleep(0.02)
    return time.monotonic() - start


def test_slow_deletes_are_not_relisted_at_the_fast_period(env: Env) -> None:
    cid = env.create("slow", [MASTER, WORKER])
    env.step_until(env.complete(cid))
    counting = driver(env)
    w = env.group(cid, "w").uuid

    # A scale-down: two machines take DELETE_S to go; the group learns how long.
    counting.lists.clear()
    env.resize(cid, "w", 1)
    took = step(env, lambda: len(env.nodes(cid, "w")) == 1, 60)
    # Nothing learned yet: fewer listings than one per 0.2 s (the old fixed period; this
    # conductor's requeue period, 0.05 s, made four times that).
    assert counting.lists[w] < took / 0.2, (counting.lists[w], took)
    learned = snapshots.load_groups(env.db, [w])[w].memory.delete_s
    assert learned is not None and DELETE_S / 2 <= learned <= took + 1.0, learned

    # The cluster's delete: every group is deleting for DELETE_S.
    counting.lists.clear()
    env.delete(cid)
    took = step(env, lambda: env.cluster(cid) is None, 60)
    for group, n in counting.lists.items():
        assert n < took / 0.2, (group, n, took)
    # The workers' group learned its delete time: it looks when the deletes are due, then
    # after a quarter of how late they are (from this conductor's 0.05 s floor, so a
    # second late costs about 13 listings: 7 seen at load ~2, 15 in a full run); at most
    # half what the old fixed 0.2 s period lists (30 or more), whatever the load.
    assert counting.lists[w] <= took / 0.4, (counting.lists[w], took)
