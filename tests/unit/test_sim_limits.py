"""The sim's limits: project quotas, per-zone capacity (no valid host), create rate limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.domain.errors import Invalid
from shoal.drivers.contract import BlockedError, BlockedKind, MachineSpec, TransientError
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld


def spec(n: int, **over: object) -> MachineSpec:
    values: dict[str, object] = dict(
        machine_id=f"m-{n}", name=f"node-{n}", project_id="p", cluster_id="c",
        nodegroup_id="ng", role="worker", flavor_id="m1.large", image_id="ubuntu-24.04",
    )  # fmt: skip
    values.update(over)
    return MachineSpec(**values)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def world(tmp_path: Path, clock: ManualClock) -> SimWorld:
    s = SimSettings(api_latency_ms=0, boot_seconds=10, delete_seconds=0, jitter=0)
    return SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", s, clock)


def test_quota_blocks_with_numbers_and_counts_usage(world: SimWorld) -> None:
    world.set_quota("p", {"cores": 20})
    for n in range(5):  # 5 x m1.large = 20 cores
        world.create(spec(n))
    with pytest.raises(BlockedError) as err:
        world.create(spec(5))
    assert err.value.kind is BlockedKind.QUOTA
    assert err.value.reason.startswith("quota exceeded: cores 20 of 20 in use, 4 more")
    q = world.quota("p")
    assert q["limits"]["cores"] == 20 and q["limits"]["instances"] == 100_000
    assert q["usage"] == {"instances": 5, "cores": 20, "ram_mb": 5 * 8192}
    world.create(spec(0))  # idempotent ensure of an existing machine is never blocked
    world.delete("m-0")  # deleting frees the quota at once
    world.create(spec(5))
    assert world.quota("p")["usage"]["cores"] == 20


def test_quota_of_other_resources_and_other_projects(world: SimWorld) -> None:
    world.set_quota("p", {"instances": 1})
    world.create(spec(1))
    with pytest.raises(BlockedError, match="quota exceeded: instances 1 of 1"):
        world.create(spec(2))
    world.create(spec(3, project_id="q"))  # another project has its own quota
    with pytest.raises(Invalid):
        world.set_quota("p", {"gpus": 1})


def test_full_zone_is_no_valid_host_with_the_zone(world: SimWorld) -> None:
    world.patch_config({"az_capacity_cores": {"az-2": 8}})
    world.create(spec(1, availability_zone="az-2"))
    world.create(spec(2, availability_zone="az-2"))
    with pytest.raises(BlockedError) as err:
        world.create(spec(3, availability_zone="az-2"))
    assert err.value.kind is BlockedKind.NO_VALID_HOST
    assert err.value.az == "az-2"
    assert "No valid host was found in az-2" in err.value.reason
    assert "cores 8 of 8 in use" in err.value.reason
    world.create(spec(4, availability_zone="az-1"))  # another zone still has room


def test_without_a_zone_the_sim_places_where_there_is_room(world: SimWorld) -> None:
    world.patch_config({"az_capacity_cores": {"az-1": 0, "az-2": 0, "az-3": 8}})
    placed = {world.create(spec(n)).az for n in range(2)}
    assert placed == {"az-3"}
    with pytest.raises(BlockedError) as err:
        world.create(spec(9))
    assert err.value.kind is BlockedKind.NO_VALID_HOST and err.value.az is None
    assert "any availability zone" in err.value.reason


def test_rate_limit_gives_429_with_retry_after(world: SimWorld, clock: ManualClock) -> None:
    world.patch_config({"rate_limit_per_s": 2})
    world.create(spec(1))
    world.create(spec(2))
    with pytest.raises(TransientError) as err:
        world.create(spec(3))
    assert "429" in err.value.reason
    assert err.value.retry_after == pytest.approx(0.5)
    clock.advance(0.5)
    world.create(spec(3))
    world.create(spec(1))  # an existing machine costs no create


def test_config_rejects_bad_values(world: SimWorld) -> None:
    with pytest.raises(Invalid):
        world.patch_config({"jitter": 2})
    with pytest.raises(Invalid):
        world.patch_config({"no_such_knob": 1})
    with pytest.raises(Invalid):
        world.patch_config({"availability_zones": []})
    cfg = world.patch_config({"availability_zones": ["az-1", "az-9"]})
    assert cfg["az_capacity_cores"]["az-9"] > 0
    world.create(spec(1, availability_zone="az-9"))


def test_rate_limit_burst_lets_that_many_seconds_of_creates_through(
    world: SimWorld, clock: ManualClock
) -> None:
    world.patch_config({"rate_limit_per_s": 2, "rate_limit_burst_s": 3})
    for n in range(6):  # the bucket starts full: 2/s x 3 s
        world.create(spec(n))
    with pytest.raises(TransientError) as err:
        world.create(spec(6))
    assert err.value.retry_after == pytest.approx(0.5)
    clock.advance(10)  # refills to the burst, not beyond
    for n in range(7, 13):
        world.create(spec(n))
    with pytest.raises(TransientError):
        world.create(spec(13))
