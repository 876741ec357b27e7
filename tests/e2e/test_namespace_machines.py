"""Namespace machines (tests/harness/kubernetes/machine.py) on their own: two machines on
one bridge, each with its own hostname, address, private dirs and cgroup root, and
nothing left once they stop. No Kubernetes binaries needed, only root."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.kubernetes.machine import Bridge, NamespaceMachine
from tests.support.kubernetes import KUBERNETES_MARKS, require_namespace_machines

pytestmark = KUBERNETES_MARKS


def test_two_machines_are_isolated_reachable_and_leave_nothing(tmp_path: Path) -> None:
    require_namespace_machines()
    bridge = Bridge()
    bridge.create()
    one = NamespaceMachine(bridge, "one", 1, tmp_path / "one")
    two = NamespaceMachine(bridge, "two", 2, tmp_path / "two")
    try:
        one.start()
        two.start()
        assert one.run(["hostname"]).stdout.strip() == "one"
        assert two.run(["hostname"]).stdout.strip() == "two"
        assert f"{two.ip}/24" in two.run(["ip", "-4", "addr", "show", "eth0"]).stdout
        # a private /etc/kubernetes per machine, kept in its work dir on the host
        one.run(["sh", "-c", "echo one > /etc/kubernetes/who"])
        assert (one.data("/etc/kubernetes") / "who").read_text() == "one\n"
        assert two.run(["cat", "/etc/kubernetes/who"], check=False).returncode != 0
        assert not Path("/etc/kubernetes/who").exists()
        # machine to machine over the bridge, and host to machine
        assert one.run(["busybox", "ping", "-c", "1", "-W", "5", two.ip]).returncode == 0
        host_ping = ["busybox", "ping", "-c", "1", "-W", "5", one.ip]
        assert subprocess.run(host_ping, capture_output=True, check=False).returncode == 0
        # a daemon runs inside: PID namespace of its own, stopped by name
        sleeper = two.spawn("sleeper", ["sleep", "600"])
        assert "sleep" in two.run(["ps", "-o", "comm="]).stdout.split()
        assert sleeper.host_pid() in two.host_pids()
        two.stop_daemon("sleeper")
        assert "sleep" not in two.run(["ps", "-o", "comm="]).stdout.split()
        cgroups = [h / one.cgroup_root.lstrip("/") for h in Path("/sys/fs/cgroup").iterdir()]
        assert (Path("/sys/fs/cgroup/memory") / one.cgroup_root.lstrip("/")).is_dir()
    finally:
        one.stop()
        two.stop()
        bridge.delete()
    assert one.host_pids() == [] and two.host_pids() == []
    assert [c for c in cgroups if c.exists()] == []
    assert not (tmp_path / "one").exists()
    assert not Path(f"/sys/class/net/{bridge.name}").exists()
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()
