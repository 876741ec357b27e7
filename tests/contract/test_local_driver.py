"""The local driver beyond the contract: its machines outlive a killed shoal and are
adopted by the next, addresses are leased deterministically and never shared, a
delete leaves nothing on the host, and real cloud-init runs the user data."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.drivers import contract
from shoal.drivers.contract import MachineSpec, MachineState, PermanentError
from shoal.drivers.harness import Unavailable
from shoal.drivers.local import hostops, machines
from shoal.drivers.local.driver import LocalDriver
from shoal.drivers.local.settings import LocalSettings
from shoal.drivers.local.testing import cleanup, local_settings, require_local
from tests.support.libvirt_host import skip_or_fail

pytestmark = pytest.mark.kubernetes


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[LocalSettings]:
    try:
        require_local()
    except Unavailable as exc:
        skip_or_fail(str(exc))
    s, lock = local_settings(tmp_path)
    try:
        yield s
    finally:
        try:
            cleanup(s)
        finally:
            lock.close()


def spec(name: str, user_data: str | None = None) -> MachineSpec:
    return MachineSpec(
        str(uuid.uuid4()), name, "p", "c", "g", "worker", "local", "host", user_data=user_data
    )


def wait(what: str, check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout}s")


def test_real_cloud_init_runs_the_user_data(settings: LocalSettings) -> None:
    d = LocalDriver(settings)
    ud = "#cloud-config\n" + json.dumps(
        {
            "hostname": "renamed",
            "write_files": [{"path": "/etc/shoal-test", "content": "written\n"}],
            "runcmd": [["sh", "-c", "hostname > /var/lib/hn; echo ran > /var/lib/ran"]],
        }
    )
    s = spec("ci-1", ud)
    d.ensure_machine(s)

    def ran() -> bool:
        try:
            return d.run(s.machine_id, ["cat", "/var/lib/ran"]).strip() == "ran"
        except hostops.MachineError:
            return False

    wait("runcmd ran", ran)
    assert d.run(s.machine_id, ["cat", "/etc/shoal-test"]) == "written\n"
    assert d.run(s.machine_id, ["cat", "/var/lib/hn"]).strip() == "renamed"

    def finished() -> bool:  # result.json comes when the final stage ends, after runcmd
        try:
            return bool(d.run(s.machine_id, ["cat", "/run/cloud-init/result.json"]))
        except hostops.MachineError:
            return False

    wait("cloud-init finished", finished)
    status = json.loads(d.run(s.machine_id, ["cat", "/run/cloud-init/result.json"]))
    assert status["v1"]["errors"] == [] and "NoCloud" in status["v1"]["datasource"]
    assert not Path("/etc/shoal-test").exists()  # the host's own /etc is untouched


def test_addresses_are_leased_lowest_first_and_never_shared(settings: LocalSettings) -> None:
    d = LocalDriver(settings)
    base = settings.subnet.rsplit(".", 1)[0]
    worker, master = spec("w-1"), dataclasses.replace(spec("m-1"), role="master")
    assert d.reserve_address("c") == f"{base}.2"  # the cluster's balancer's
    assert d.reserve_address("c") == f"{base}.2"  # held: the same
    assert d.ensure_machine(worker).address == f"{base}.3"
    assert d.reserve_machine_address(master.machine_id) == f"{base}.4"  # before it is made
    assert d.ensure_machine(spec("w-2")).address == f"{base}.5"
    assert d.ensure_machine(master).address == f"{base}.4"  # the one reserved for it
    d.delete_machine(master.machine_id)
    assert d.reserve_address("c") == f"{base}.2"
    d.release_cluster("p", "c")
    d.delete_machine(worker.machine_id)
    assert d.ensure_machine(spec("w-3")).address == f"{base}.2"  # lowest free again


SERVE_NAME = (
    "import os, socket\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 6443))\n"
    "s.listen()\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    c.sendall(os.uname().nodename.encode())\n"
    "    c.close()\n"
)


def answer(address: str) -> str:
    """Who answers on the API port at `address` ("" when nobody does)."""
    import socket

    try:
        with socket.create_connection((address, 6443), timeout=3) as c:
            c.settimeout(3)
            got = b""
            while chunk := c.recv(100):
                got += chunk
            return got.decode()
    except OSError:
        return ""


def test_a_clusters_api_address_forwards_to_its_running_masters(
    settings: LocalSettings,
) -> None:
    """The balancer on the reserved address sends each connection to a running master
    of its cluster (never another cluster's, never a worker); a master whose machine
    is killed is passed over; releasing the cluster stops it and frees the address."""
    d = LocalDriver(settings)
    assert contract.Feature.API_LOAD_BALANCER in d.capabilities().features
    assert isinstance(d, contract.ApiLoadBalancingDriver)
    api = d.reserve_address("c")
    ud = "#cloud-config\n" + json.dumps(
        {
            "write_files": [{"path": "/root/serve.py", "content": SERVE_NAME}],
            "runcmd": [["sh", "-c", "setsid python3 /root/serve.py >/dev/null 2>&1 &"]],
        }
    )
    m1, m2 = (dataclasses.replace(spec(n, ud), role="master") for n in ("lb-m1", "lb-m2"))
    other = dataclasses.replace(spec("lb-x", ud), role="master", cluster_id="other")
    worker = spec("lb-w", ud)
    for s in (m1, m2, other, worker):
        d.ensure_machine(s)
    seen: set[str] = set()

    def both() -> bool:
        seen.add(answer(api))
        return {"lb-m1", "lb-m2"} <= seen

    wait("both masters answer through the balancer", both, 120)
    assert seen - {""} == {"lb-m1", "lb-m2"}
    r1 = machines.read(Path(settings.state_dir) / "machines" / m1.machine_id)
    assert r1 is not None
    os.kill(r1.init_pid, signal.SIGKILL)  # the machine is lost, not deleted
    wait("m1 reported lost", lambda: d.list_machines({"shoal-node": m1.machine_id})[0].state
         is MachineState.ERROR)  # fmt: skip
    answers = [answer(api) for _ in range(6)]
    assert answers == ["lb-m2"] * 6, answers
    d.delete_machine(m1.machine_id)
    d.delete_machine(m2.machine_id)
    wait("nobody answers once no master runs", lambda: answer(api) == "")
    d.release_cluster("p", "c")
    assert not (Path(settings.state_dir) / "balancers" / "c.json").exists()
    assert (
        api
        not in subprocess.run(
            ["ip", "-o", "addr", "show", "dev", settings.bridge], capture_output=True, text=True
        ).stdout
    )


def test_machines_outlive_a_killed_shoal_and_are_adopted(
    settings: LocalSettings, tmp_path: Path
) -> None:
    s = spec("survivor-1")
    script = (
        "import sys, time\n"
        "from shoal.drivers.local.driver import LocalDriver\n"
        "from shoal.drivers.local.settings import LocalSettings\n"
        "from shoal.drivers.contract import MachineSpec\n"
        f"d = LocalDriver(LocalSettings(state_dir={settings.state_dir!r}, "
        f"bridge={settings.bridge!r}, subnet={settings.subnet!r}))\n"
        f"d.ensure_machine(MachineSpec({s.machine_id!r}, 'survivor-1', 'p', 'c', 'g', "
        "'worker', 'local', 'host'))\n"
        "print('made', flush=True)\n"
        "time.sleep(600)\n"
    )
    shoal = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert shoal.stdout is not None and shoal.stdout.readline().strip() == "made"
    finally:
        os.kill(shoal.pid, signal.SIGKILL)
        shoal.wait(timeout=30)
    after = LocalDriver(settings)  # a new shoal
    (m,) = after.list_machines({contract.TAG_NODE: s.machine_id})
    assert m.state is MachineState.ACTIVE and dict(m.tags) == s.tags
    assert after.ensure_machine(s).address == m.address  # idempotent: adopted, not remade
    assert after.pids(s.machine_id)
    after.delete_machine(s.machine_id)
    assert after.list_machines({}) == []


def test_delete_leaves_nothing_on_the_host(settings: LocalSettings) -> None:
    d = LocalDriver(settings)
    s = spec("gone-1")
    d.ensure_machine(s)
    pids = d.pids(s.machine_id)
    record = machines.read(Path(settings.state_dir) / "machines" / s.machine_id)
    assert record is not None and hostops.link_exists(record.veth)
    d.delete_machine(s.machine_id)
    assert [p for p in pids if hostops.start_time(p)] == []
    assert not (Path(settings.state_dir) / "machines" / s.machine_id).exists()
    assert hostops.leftover_cgroups(f"/shoal-local-{s.machine_id}") == []
    assert not hostops.link_exists(record.veth)
    assert settings.state_dir not in Path("/proc/self/mounts").read_text()
    assert d.list_machines({}) == []


def test_validate_says_what_cannot_run(tmp_path: Path) -> None:
    d = LocalDriver(LocalSettings(state_dir=str(tmp_path), kubernetes_bin=str(tmp_path / "no")))
    assert "kubernetes_bin" in d.cannot_run() or "root" in d.cannot_run()
    with pytest.raises(PermanentError, match="cannot run machines here"):
        d.ensure_machine(spec("x-1"))
    bad = MachineSpec("m", "x", "p", "c", "g", "worker", "big", "ubuntu", "az-9",
                      options={"foo": "1"})  # fmt: skip
    problems = " ".join(d.validate(bad))
    assert "'big'" in problems and "'ubuntu'" in problems and "'az-9'" in problems
    assert "'foo'" in problems
