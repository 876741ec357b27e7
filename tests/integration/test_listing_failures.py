"""A group whose provider listing fails pass after pass says so in its (and its
cluster's) status_reason, with since when and how many attempts, and stops saying
it once a listing works: the real database, the real sim with an injected fault."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from shoal.domain import conditions as cond
from tests.integration.conductor_support import Env, make_env
from tests.support.waiting import scaled

MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "flavor_id": "m1.small", "node_count": 3}
SAYS = re.compile(
    r"cannot list the machines of provider sim: Internal Server Error \(HTTP 500\) "
    r"\(since \d\d:\d\d UTC, (\d+) attempts?\)"
)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


def test_failing_listings_are_said_with_since_and_attempts_until_they_work(env: Env) -> None:
    cid = env.create("blind", [MASTER, WORKER])
    env.step_until(env.complete(cid))
    before = [n.uuid for n in env.nodes(cid)]
    g = env.group(cid, "w")
    assert g.status_reason is None
    rule = env.world.add_fault({"kind": "transient", "op": "list", "nodegroup": g.uuid})
    attempts: list[int] = []
    deadline = time.monotonic() + scaled(60)
    while not attempts or attempts[-1] < 3:
        assert time.monotonic() < deadline, f"no growing count of attempts: {attempts}"
        env.skew[0] += timedelta(seconds=5)
        env.conductor.run_once()
        found = SAYS.search(env.group(cid, "w").status_reason or "")
        if found:
            attempts.append(int(found.group(1)))
    assert attempts == sorted(attempts) and attempts[0] == 1, attempts
    assert env.world.fault(rule["id"])["fired"] >= 3
    g = env.group(cid, "w")
    ready = cond.get(g.conditions, cond.READY)
    assert ready is not None and ready.reason == cond.LISTING_FAILED
    assert "check that the provider answers" in (g.status_reason or "")
    env.step_until(lambda: "node group w: cannot list" in (env.cluster(cid).status_reason or ""))  # type: ignore[union-attr]
    # Nothing changed meanwhile; the other group is untouched.
    assert [n.uuid for n in env.nodes(cid)] == before
    assert env.group(cid, "m").status_reason is None
    assert env.cluster(cid).status == "CREATE_COMPLETE"  # type: ignore[union-attr]
    env.world.delete_fault(rule["id"])
    deadline = time.monotonic() + scaled(60)
    while env.group(cid, "w").status_reason or (env.cluster(cid).status_reason or ""):  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the reason stayed after the listing worked"
        env.skew[0] += timedelta(seconds=30)
        env.conductor.run_once()
        time.sleep(0.02)
    ready = cond.get(env.group(cid, "w").conditions, cond.READY)
    assert ready is not None and ready.status == cond.TRUE
