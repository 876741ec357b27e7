"""The sim cloud in a process of its own (SHOAL_SIM_OWN_PROCESS): the conductor
drives it through the proxy exactly as it drives the in-process world, the
driver's errors cross the process boundary whole, and the child goes away with
its parent's close() or death."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from shoal.conductor.loop import Conductor
from shoal.db import migrations
from shoal.db.engine import Database
from shoal.domain import conditions as cond
from shoal.drivers.contract import BlockedError, BlockedKind, PermanentError, TransientError
from shoal.drivers.providers import Providers
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.process import SimProcess
from shoal.runtime import build_runtime
from shoal.settings import Settings
from tests.integration.conductor_support import FAST_CONDUCTOR, FAST_SIM, Env
from tests.integration.test_conductor_reconcile import HETERO, MASTER, WORKER


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[Env, SimProcess]]:
    db = Database(f"sqlite:///{tmp_path / 'shoal.db'}")
    migrations.upgrade(db)
    proc = SimProcess(f"sqlite:///{tmp_path / 'sim.db'}", FAST_SIM)
    conductor = Conductor(db, Providers.of({"sim": SimDriver(proc.world)}), FAST_CONDUCTOR)
    try:
        yield Env(db, proc.world, conductor), proc
    finally:
        conductor.stop()
        proc.close()
        db.close()


def test_errors_survive_the_process_boundary() -> None:
    for err in (
        TransientError("429 slow down", retry_after=1.5),
        BlockedError("no valid host in az-2", BlockedKind.NO_VALID_HOST, az="az-2"),
        PermanentError("flavor 'x' does not exist"),
    ):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and vars(back) == vars(err)


def test_a_cluster_converges_and_deletes_through_the_proxy(
    remote: tuple[Env, SimProcess],
) -> None:
    env, proc = remote
    assert proc.pid != os.getpid() and psutil.pid_exists(proc.pid)
    cid = env.create("far", HETERO)
    env.step_until(env.complete(cid))
    nodes = env.nodes(cid)
    assert len(nodes) == 12 and sorted(n.uuid for n in nodes) == env.servers(cid)
    assert all(n.address for n in nodes)
    env.delete(cid)
    env.step_until(lambda: env.cluster(cid) is None)
    assert env.servers(cid) == []


def test_a_quota_block_from_the_other_process_is_reported_and_resumes(
    remote: tuple[Env, SimProcess],
) -> None:
    env, _ = remote
    env.world.set_quota("p1", {"cores": 4})  # m1.small = 1 core: 4 of 6 fit
    cid = env.create("q", [MASTER, {**WORKER, "node_count": 5}])
    env.step_until(lambda: (env.group(cid, "w").status_reason or "").startswith("BLOCKED"))
    ready = cond.get(env.group(cid, "w").conditions, cond.READY)
    assert ready is not None and ready.reason == cond.BLOCKED and "cores" in ready.message
    env.world.set_quota("p1", {"cores": 100})
    env.step_until(env.complete(cid))
    assert len(env.servers(cid)) == 6


def test_close_stops_the_child(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, driver_defaults={"sim": replace(FAST_SIM, own_process=True)}
    )
    runtime = build_runtime(settings, with_conductor=False)
    child = runtime.providers["sim"].process.pid
    assert runtime.sim.servers() == []  # the admin API's world is the proxy
    runtime.close()
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(child).wait(timeout=10)  # reaped by close(); gone either way
    assert not psutil.pid_exists(child)


def test_the_child_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    """A SIGKILLed shoal leaves no sim process behind (it would hold the sim's database)."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from shoal.drivers.sim.process import SimProcess
        from shoal.drivers.sim.settings import SimSettings
        if __name__ == "__main__":
            proc = SimProcess("sqlite:///{tmp_path / "sim.db"}", SimSettings())
            print(proc.pid, flush=True)
            time.sleep(60)
        """
    )
    (tmp_path / "parent.py").write_text(script)
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert psutil.pid_exists(child)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the sim process outlived its parent"
        time.sleep(0.1)
