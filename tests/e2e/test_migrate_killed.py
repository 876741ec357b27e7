"""`shoal db migrate` killed at random moments (SIGKILL), as a real process: `shoal
serve` on the target refuses with one line or has everything, migrate run again
finishes, and the cloud's machines are untouched throughout (0 deleted, 0
created)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from shoal.db import deployment_state
from shoal.db.engine import Database
from shoal.drivers.sim.world import SimWorld
from tests.support.databases import throwaway_pg
from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled

pytestmark = pytest.mark.postgres
LATEST = {"OpenStack-API-Version": "container-infra latest"}


def machines(url: str) -> set[str]:
    world = SimWorld.open(url)
    try:
        return {s.machine_id for s in world.servers() if s.state != "DELETING"}
    finally:
        world.close()


def marked(target: str) -> bool:
    """Whether a copy into `target` is under way (its marker is written)."""
    db = Database(target)
    try:
        return deployment_state.unfinished_copy(db) is not None
    finally:
        db.close()


def migrate(env: dict[str, str], target: str, kill_after: float | None) -> int | None:
    """Run `shoal db migrate --to target`; SIGKILL it `kill_after` seconds after it
    began writing the target (None: let it finish). Its exit code, or None when it
    was killed."""
    proc = subprocess.Popen(
        [SHOAL, "db", "migrate", "--to", target],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if kill_after is not None:
        deadline = time.monotonic() + 60
        while not marked(target) and proc.poll() is None:
            assert time.monotonic() < deadline, "migrate never began the copy"
            time.sleep(0.01)
        try:
            return proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            return None
    return proc.wait(timeout=300)


def serve_once(env: dict[str, str], log: Path) -> str:
    """Start `shoal serve` on a target: "refused" (exit 2, one line naming the
    unfinished copy) or "served" (it answered; then stopped with SIGINT)."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([SHOAL, "serve", "--port", str(port)], env=env, stderr=out)
    deadline = time.monotonic() + scaled(30)
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                lines = log.read_text().strip().splitlines()
                ok = proc.returncode == 2 and len(lines) == 1 and "unfinished copy" in lines[0]
                return "refused" if ok else f"exit {proc.returncode}: {lines}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 200:
                    return "served"
            except httpx.TransportError:
                time.sleep(0.1)
        return "neither refused nor served in 30 s"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)


def test_a_killed_migrate_is_refused_then_finished_and_no_machine_moves(tmp_path: Path) -> None:
    data = tmp_path / "data"
    source_env = shoal_env(data)
    port = free_port()
    with serving(source_env, port, tmp_path / "source.log"):
        api = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(source_env), timeout=30
        )
        groups = [
            {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 3},
            *({"name": f"w{i}", "flavor_id": "m1.small", "node_count": 100} for i in range(6)),
        ]
        body = {"name": "big", "image_id": "fedora-coreos-40", "node_groups": groups}
        assert api.post("/clusters", json=body).status_code == 202
        deadline = time.monotonic() + scaled(120)
        while api.get("/clusters/big").json()["status"] != "CREATE_COMPLETE":
            assert time.monotonic() < deadline
            time.sleep(0.3)
    before = machines(f"sqlite:///{data / 'sim.db'}")
    assert len(before) == 603
    rng = random.Random(13)
    with throwaway_pg() as target:
        full = time.monotonic()
        with throwaway_pg() as scratch:  # how long a whole copy takes here
            assert migrate(source_env, scratch, None) == 0
        duration = time.monotonic() - full
        # On the target the sweeper looks every second, with no grace and no breaker:
        # were a half copy ever served, the machines of its missing rows would go.
        target_env = {
            **shoal_env(tmp_path / "target"),
            "SHOAL_DATABASE_URL": target,
            "SHOAL_CONDUCTOR_SWEEP_SECONDS": "1",
            "SHOAL_CONDUCTOR_SWEEP_GRACE_SECONDS": "0",
            "SHOAL_CONDUCTOR_SWEEP_BREAKER_SHARE": "1",
        }
        finished = False
        for _ in range(4):
            code = migrate(source_env, target, rng.uniform(0.05, duration))
            finished = finished or code == 0
            state = serve_once(target_env, tmp_path / "probe.log")
            # Killed half-way: refused in one line. Finished (before the kill came):
            # served whole. Never served half.
            assert state in ("refused", "served"), state
            assert state == "served" or not finished
            finished = finished or state == "served"  # done just before its kill
            if state == "served":  # whole: every machine of the copy, none made or swept
                assert machines(target) == before
        if not finished:
            assert migrate(source_env, target, None) == 0  # run again: it finishes
        tport = free_port()
        with serving(target_env, tport, tmp_path / "target.log"):
            api = httpx.Client(
                base_url=f"http://127.0.0.1:{tport}/v1",
                headers=admin_headers(target_env),
                timeout=30,
            )
            assert api.get("/clusters/big").json()["node_count"] == 600
            time.sleep(5)  # the conductor's passes and five sweeps over the copy
        assert machines(target) == before  # 0 deleted, 0 created
    assert machines(f"sqlite:///{data / 'sim.db'}") == before  # the source as it was
