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
    assert boot is not None and BOOT_S <= boot <= BOOT_S * 1.5, boot  # as seen: a bit late

    second = env.create("second", [MASTER, WORKER])
    env.step_until(env.complete(second), timeout=120)
    # Both clusters boot their master, then their workers (two boots of 4 s each). The
    # first's groups start from nothing: about 15 listings each before their boot is
    # done (31-33 in all, idle machine); the second's wait for it with one or two (4-5).
    assert counting.lists[second] <= counting.lists[first] / 2, counting.lists
