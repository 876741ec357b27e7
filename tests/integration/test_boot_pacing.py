"""A group that has learned nothing of its own is paced by what its provider's machines
of its flavor took lately (conductor/priors.py): a real conductor steps (`run_once`,
which runs only what is due) over a sim whose machines take seconds to boot, and the
driver's listings of each cluster's groups are counted. The first cluster's groups
learn from nothing (a look after a quarter of the time so far, from this conductor's
0.05 s floor); the second's expect the first's boot time and look when it is due."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from shoal.conductor import pacing
from shoal.drivers.contract import TAG_CLUSTER
from tests.integration.conductor_support import FAST_SIM, CountingSim, Env, make_env

BOOT_S = 4.0  # each machine takes this long to boot (no jitter: no late tail to count)
MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "flavor_id": "m1.small", "node_count": pacing.PRIOR_MIN}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    sim = replace(FAST_SIM, boot_seconds=BOOT_S, jitter=0.0)
    yield from make_env(
        f"sqlite:///{tmp_path / 'shoal.db'}", sim=sim, driver=lambda w: CountingSim(w, TAG_CLUSTER)
    )


def test_a_second_clusters_boots_are_looked_at_when_the_first_ones_say(env: Env) -> None:
    provider = env.conductor.ctx.provider(None)
    assert provider is not None and isinstance(provider.driver, CountingSim)
    counting = provider.driver

    first = env.create("first", [MASTER, WORKER])
    env.step_until(env.complete(first), timeout=120)
    boot, _ = provider.moves.priors("m1.small")
    # From the accepted create to when the sim says it was ready: its own boot time.
    assert boot is not None and BOOT_S * 0.95 <= boot <= BOOT_S * 1.05, boot

    second = env.create("second", [MASTER, WORKER])
    env.step_until(env.complete(second), timeout=120)
    # Both clusters boot their master, then their workers (two boots of 4 s each). The
    # first's groups start from nothing: about 15 listings each before their boot is
    # done (31-33 in all, idle machine); the second's wait for it with one or two (4-5).
    assert counting.lists[second] <= counting.lists[first] / 2, counting.lists


RATE = 4.0  # creates per second the sim takes (a bucket of one): 9 machines wait up to 2 s


@pytest.fixture
def paced_env(tmp_path: Path) -> Iterator[Env]:
    sim = replace(
        FAST_SIM, boot_seconds=1.0, jitter=0.0, rate_limit_per_s=RATE, rate_limit_burst_s=0.0
    )
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}", sim=sim)


def test_a_boot_is_timed_from_the_accepted_create_to_the_providers_ready_time(
    paced_env: Env,
) -> None:
    """Machines that waited for the cloud's rate limit learn a boot of the cloud's own
    boot time: from the create the cloud took (`building_at`) to when it says the machine
    was ready (`Machine.ready_at`), not from the node row written before the wait, nor
    to the look that saw it ready."""
    env = paced_env
    cid = env.create("paced", [MASTER, WORKER])
    env.step_until(env.complete(cid), timeout=120)
    nodes = env.nodes(cid)
    assert len(nodes) == 1 + pacing.PRIOR_MIN
    waits = [(n.building_at - n.created_at).total_seconds() for n in nodes if n.building_at]
    boots = [(n.ready_at - n.building_at).total_seconds() for n in nodes if n.building_at]
    assert len(boots) == len(nodes), nodes
    assert max(waits) >= 1.0, waits  # the rate limit held the last creates back
    assert all(0.85 <= b <= 1.05 for b in boots), boots  # the cloud's 1 s boot
    provider = env.conductor.ctx.provider(None)
    assert provider is not None
    boot, _ = provider.moves.priors("m1.small")
    assert boot is not None and 0.85 <= boot <= 1.05, boot
