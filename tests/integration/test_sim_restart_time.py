"""The sim's reboots follow its time scale: a reboot too quick for any listing to see
the machine down counts as done once the sim's longest restart has passed, not
after the conductor's 60 s default for clouds that say nothing (which, in real time,
made every batch of a sim reboot wait a minute). Real time here: the conductor's
clock is not moved."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.services import operations
from tests.integration.conductor_support import FAST_SIM, Env, make_env
from tests.support.waiting import scaled

NODES = [
    {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
    {"name": "w", "flavor_id": "m1.small", "node_count": 2},
]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


def test_the_sim_says_how_long_its_restarts_take_in_real_seconds(env: Env) -> None:
    caps = env.conductor.ctx.providers["sim"].driver.capabilities()
    # A rebuild is a boot (0.3 s here), a reboot a quarter of one; jitter 20 %.
    assert caps.restart_seconds == pytest.approx(FAST_SIM.boot_seconds * 1.2)
    env.world.patch_config({"time_scale": 10.0})
    env.world.snapshot()
    caps = env.conductor.ctx.providers["sim"].driver.capabilities()
    assert caps.restart_seconds == pytest.approx(FAST_SIM.boot_seconds * 1.2 / 10)


def test_a_reboot_batch_ends_in_the_sims_time_not_a_minute(env: Env) -> None:
    cid = env.create("quick", NODES)
    env.step_until(env.complete(cid))
    (uuid,) = operations.start(
        env.db, env.caller, cid, {"kind": "reboot", "nodegroup": "w", "batch_size": 2}
    )
    began = time.monotonic()
    while operations.get(env.db, env.caller, cid, uuid).operation.state == "RUNNING":
        waited = time.monotonic() - began
        assert waited < min(scaled(20), 50), "the reboot waited for the 60 s default"
        env.conductor.run_once()
        # Longer than the sim's reboot (0.3 s / 4): no listing sees the machines down.
        time.sleep(0.4)
    view = operations.get(env.db, env.caller, cid, uuid)
    assert view.operation.state == "SUCCEEDED"
    assert [t.state for t in view.tasks] == ["SUCCEEDED"] * 2
    assert env.world.api_calls().get("reboot") == 2
