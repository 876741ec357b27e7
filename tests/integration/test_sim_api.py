"""The sim admin endpoints through the real app over HTTP, on a real SimWorld (no mocks)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from shoal import auth
from shoal.db import migrations
from shoal.db.engine import Database
from shoal.drivers.contract import MachineSpec
from shoal.drivers.providers import Provider, Providers
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from shoal.runtime import Runtime
from shoal.settings import ProviderSettings, Settings
from tests.support.server import LiveServer, free_port


@contextmanager
def _serve(world: SimWorld | None) -> Iterator[httpx.Client]:
    """The real app (Magnum error mapping included) on 127.0.0.1, over real HTTP."""
    if world is not None:
        provider = Provider(ProviderSettings(name="sim"), SimDriver(world), world)
    else:  # a deployment whose only provider is not a sim
        other: Any = object()
        provider = Provider(ProviderSettings(name="east", driver="openstack"), other)
    providers = Providers([provider], provider.name)
    with tempfile.TemporaryDirectory() as tmp:  # the runtime's own database (presence)
        db = Database(f"sqlite:///{tmp}/shoal.db")
        migrations.upgrade(db)
        settings = Settings()
        runtime = Runtime(
            settings=settings, db=db, providers=providers, auth=auth.build(settings, db)
        )
        server = LiveServer(runtime, free_port())
        server.start()
        try:
            admin = {"X-Auth-Token": server.token("default", "admin")}
            with httpx.Client(base_url=server.url, timeout=10, headers=admin) as client:
                yield client
        finally:
            server.stop()
            runtime.close()
            db.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[SimWorld]:
    s = SimSettings(api_latency_ms=0, boot_seconds=10, jitter=0)
    w = SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", s, ManualClock())
    yield w
    w.close()


@pytest.fixture
def client(world: SimWorld) -> Iterator[httpx.Client]:
    with _serve(world) as c:
        yield c


def spec(n: int, ng: str) -> MachineSpec:
    return MachineSpec(
        machine_id=f"m-{n}", name=f"node-{n}", project_id="p", cluster_id="c",
        nodegroup_id=ng, role="worker", flavor_id="m1.small", image_id="ubuntu-24.04",
    )  # fmt: skip


def test_servers_with_filters(client: httpx.Client, world: SimWorld) -> None:
    world.create(spec(1, "a"))
    world.create(spec(2, "b"))
    body = client.get("/v1/sim/servers").json()
    assert [s["machine_id"] for s in body["servers"]] == ["m-1", "m-2"]
    first = body["servers"][0]
    assert set(first) >= {"machine_id", "name", "state", "az", "address", "tags", "flavor",
                          "image", "created_at"}  # fmt: skip
    got = client.get("/v1/sim/servers", params={"nodegroup": "b", "state": "BUILDING"}).json()
    assert [s["machine_id"] for s in got["servers"]] == ["m-2"]
    assert client.get("/v1/sim/servers", params={"state": "ACTIVE"}).json()["servers"] == []
    assert client.get("/v1/sim/servers", params={"state": "BOGUS"}).status_code == 400


def test_losing_a_server_deletes_it_behind_shoals_back(
    client: httpx.Client, world: SimWorld
) -> None:
    world.create(spec(1, "a"))
    world.create(spec(2, "a"))
    assert client.delete("/v1/sim/servers/m-1").status_code == 204
    states = {s.machine_id: s.state.value for s in world.find({})}
    assert states.get("m-1") in (None, "DELETING") and states["m-2"] == "BUILDING"
    r = client.delete("/v1/sim/servers/no-such")
    assert r.status_code == 404 and "no-such" in r.json()["errors"][0]["detail"]
    assert [s.machine_id for s in world.find({}) if s.state.value != "DELETING"] == ["m-2"]


def test_config_get_and_patch(client: httpx.Client, world: SimWorld) -> None:
    assert client.get("/v1/sim/config").json()["boot_seconds"] == 10
    r = client.patch("/v1/sim/config", json={"time_scale": 50, "az_capacity_cores": {"az-2": 8}})
    assert r.status_code == 200
    assert r.json()["time_scale"] == 50 and r.json()["az_capacity_cores"]["az-2"] == 8
    assert world.config()["time_scale"] == 50
    assert client.patch("/v1/sim/config", json={"warp": 9}).status_code == 400
    assert client.patch("/v1/sim/config", json={"jitter": 5}).status_code == 400


def test_quotas(client: httpx.Client, world: SimWorld) -> None:
    world.create(spec(1, "a"))
    r = client.put("/v1/sim/quotas/p", json={"cores": 3})
    assert r.status_code == 200
    assert r.json()["limits"]["cores"] == 3 and r.json()["usage"]["cores"] == 1
    assert client.get("/v1/sim/quotas/p").json()["limits"]["cores"] == 3
    assert client.put("/v1/sim/quotas/p", json={"gpus": 1}).status_code == 400


def test_faults_lifecycle(client: httpx.Client) -> None:
    r = client.post("/v1/sim/faults", json={"kind": "no_valid_host", "az": "az-2", "count": 2})
    assert r.status_code == 201
    rule = r.json()
    assert rule["id"] and rule["kind"] == "no_valid_host" and rule["fired"] == 0
    client.post("/v1/sim/faults", json={"kind": "transient", "status": 503})
    assert len(client.get("/v1/sim/faults").json()["faults"]) == 2
    assert client.delete(f"/v1/sim/faults/{rule['id']}").status_code == 204
    assert client.delete(f"/v1/sim/faults/{rule['id']}").status_code == 404
    assert client.delete("/v1/sim/faults").status_code == 204
    assert client.get("/v1/sim/faults").json()["faults"] == []
    assert client.post("/v1/sim/faults", json={"kind": "meteor"}).status_code == 400
    bad_op = {"kind": "quota_exceeded", "op": "delete"}
    assert client.post("/v1/sim/faults", json=bad_op).status_code == 400
    # Integers beyond an INTEGER column: a 400 naming the field, nothing stored.
    for body in ({"kind": "transient", "count": 10**23}, {"kind": "transient", "status": 10**23}):
        r = client.post("/v1/sim/faults", json=body)
        assert r.status_code == 400 and next(iter(body.keys() - {"kind"})) in r.text
    assert client.delete(f"/v1/sim/faults/{10**23}").status_code == 400
    assert client.put("/v1/sim/quotas/p", json={"cores": 10**23}).status_code == 400
    assert client.get("/v1/sim/faults").json()["faults"] == []


def test_reset(client: httpx.Client, world: SimWorld) -> None:
    world.create(spec(1, "a"))
    client.patch("/v1/sim/config", json={"boot_seconds": 99})
    assert client.post("/v1/sim/reset").status_code == 204
    assert world.find({}) == [] and world.config()["boot_seconds"] == 10


def test_without_the_sim_driver_is_a_conflict() -> None:
    with _serve(None) as client:
        r = client.get("/v1/sim/servers")
    assert r.status_code == 409 and "no provider uses the sim" in r.json()["errors"][0]["detail"]
