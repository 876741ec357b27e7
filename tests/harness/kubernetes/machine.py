"""Namespace machines: a Kubernetes node as a set of Linux namespaces on this host
(the host operations are shared with the local driver, shoal.drivers.local.hostops).

A `NamespaceMachine` is a PID + mount + network + UTS + IPC namespace whose PID 1 is
machine_init.sh: its own hostname, its own IP on a `Bridge` that the host also sits on,
and private /etc/kubernetes, /var/lib/kubelet, /var/lib/containerd, /run/containerd,
/var/lib/etcd, /var/log/pods, ... (bind mounts of its work dir), so that containerd, the
kubelet and a control plane run there with their default paths, as real processes, side
by side with another machine's. Each machine also gets a cgroup root of its own
(`cgroup_root`, for the kubelet's `cgroupRoot`), so two kubelets never share a cgroup.

`run` runs a command inside, `spawn` starts a daemon inside (its output in
<work dir>/log/<name>.log), `stop` ends PID 1, which makes the kernel kill everything
left in the machine; then the machine's cgroups and work dir are removed. Nothing
outlives it: the bridge and the host side of the veths are deleted, and should the
test process die without `stop`, `setpriv --pdeathsig` + `unshare --kill-child` end
the machine too. Needs root (and `unshare`, `nsenter`, `ip`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from shoal.drivers.local.hostops import (
    PATH,
    MachineError,
    missing_prerequisites,
    pid_namespace_pids,
)
from shoal.drivers.local.hostops import ip as _ip
from shoal.drivers.local.hostops import rss_kib as _rss_kib

__all__ = ["Bridge", "MachineError", "NamespaceMachine", "missing_prerequisites"]

HERE = Path(__file__).resolve().parent
MACHINE_INIT = HERE / "machine_init.sh"
SLOTS = 64
SUBNET_PREFIX = "10.215"  # slot N gets 10.215.N.0/24 on its own bridge
SLOT_DIR = Path(tempfile.gettempdir()) / "shoal-k8s-slots"
CGROUP_FS = Path("/sys/fs/cgroup")
START_TIMEOUT = 20.0


class Bridge:
    """A Linux bridge on the host with a /24 of its own (the host has .1 on it).

    A slot (an flock held while the bridge exists) makes the name and subnet unique
    among the test runs on this host.
    """

    def __init__(self) -> None:
        self.slot, self._slot_lock = self._claim_slot()
        self.name = f"shk8s{self.slot}"
        self.host_ip = f"{SUBNET_PREFIX}.{self.slot}.1"
        self.created = False

    @staticmethod
    def _claim_slot() -> tuple[int, IO[str]]:
        SLOT_DIR.mkdir(parents=True, exist_ok=True)
        for slot in range(SLOTS):
            lock = (SLOT_DIR / f"{slot}.lock").open("w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            return slot, lock
        raise MachineError(f"all {SLOTS} namespace-machine slots in {SLOT_DIR} are taken")

    def address(self, index: int) -> str:
        """The address of machine `index` (1, 2, ...) on this bridge."""
        if not 1 <= index <= 250:
            raise MachineError(f"machine index {index} is outside 1..250")
        return f"{SUBNET_PREFIX}.{self.slot}.{index + 1}"

    def create(self) -> None:
        with contextlib.suppress(MachineError):  # a leftover of a killed run in this slot
            _ip("link", "del", self.name)
        _ip("link", "add", self.name, "type", "bridge")
        self.created = True
        _ip("addr", "add", f"{self.host_ip}/24", "dev", self.name)
        _ip("link", "set", self.name, "up")

    def delete(self) -> None:
        if self.created:
            with contextlib.suppress(MachineError):
                _ip("link", "del", self.name)
            self.created = False
        self._slot_lock.close()


@dataclass
class Daemon:
    name: str
    log: Path
    proc: subprocess.Popen[bytes]  # the nsenter process; its child is the daemon

    def host_pid(self) -> int:
        """The daemon's PID as the host sees it (the only child of nsenter), 0 if gone."""
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return 0
        return int(children.split()[0]) if children.split() else 0


@dataclass
class NamespaceMachine:
    bridge: Bridge
    name: str
    index: int
    work_dir: Path
    keep: bool = False
    daemons: dict[str, Daemon] = field(default_factory=dict)
    _unshare: subprocess.Popen[bytes] | None = None
    init_pid: int = 0

    @property
    def ip(self) -> str:
        return self.bridge.address(self.index)

    @property
    def cgroup_root(self) -> str:
        """The machine's own cgroup (in every v1 hierarchy), for the kubelet's cgroupRoot."""
        return f"/shoal-k8s-{self.bridge.slot}-{self.name}"

    @property
    def veth(self) -> str:
        return f"shk{self.bridge.slot}m{self.index}"

    def data(self, path: str) -> Path:
        """Where a private dir of the machine (e.g. "/etc/kubernetes") lives on the host."""
        return self.work_dir / "data" / path.strip("/").replace("/", "-")

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "log").mkdir(exist_ok=True)
        argv = ["setpriv", "--pdeathsig", "KILL", "unshare", "--pid", "--fork", "--kill-child"]
        argv += ["--mount-proc", "--net", "--uts", "--ipc", "--mount", "--propagation", "private"]
        argv += ["sh", str(MACHINE_INIT), str(self.work_dir), self.name]
        with (self.work_dir / "log" / "init.log").open("wb") as log:
            self._unshare = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT
        while not (self.work_dir / "init.ready").exists():
            if self._unshare.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise MachineError(
                    f"namespace machine {self.name} did not start: "
                    f"{(self.work_dir / 'log' / 'init.log').read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.05)
        children = Path(f"/proc/{self._unshare.pid}/task/{self._unshare.pid}/children").read_text()
        self.init_pid = int(children.split()[0])
        _ip(
            "link",
            "add",
            self.veth,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            str(self.init_pid),
        )
        _ip("link", "set", self.veth, "master", self.bridge.name, "up")
        self.run(["ip", "addr", "add", f"{self.ip}/24", "dev", "eth0"])
        self.run(["ip", "link", "set", "eth0", "up"])
        self.run(["ip", "route", "add", "default", "via", self.bridge.host_ip])
        hosts = f"127.0.0.1\tlocalhost\n{self.ip}\t{self.name}\n"
        self.run(["sh", "-c", f"printf '{hosts}' > /etc/hosts"])
        self._make_cgroups()

    def _hierarchies(self, with_unified: bool = False) -> list[Path]:
        """The cgroup v1 hierarchies (and the hybrid cgroup2 mount, where runc also makes
        the pods' cgroups: it is cleaned, not prepared)."""
        return [
            p
            for p in sorted(CGROUP_FS.iterdir())
            if p.is_dir() and (with_unified or p.name != "unified")
        ]

    def _make_cgroups(self) -> None:
        for hierarchy in self._hierarchies():
            own = hierarchy / self.cgroup_root.lstrip("/")
            own.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):  # an empty cpuset admits no task
                if (own / knob).exists() and not (own / knob).read_text().strip():
                    (own / knob).write_text((hierarchy / knob).read_text())

    def _remove_cgroups(self) -> None:
        for hierarchy in self._hierarchies(with_unified=True):
            own = hierarchy / self.cgroup_root.lstrip("/")
            if not own.is_dir():
                continue
            dirs = sorted((p for p in own.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for d in [*dirs, own]:
                with contextlib.suppress(OSError):
                    d.rmdir()

    def _nsenter(self) -> list[str]:
        if not self.init_pid:
            raise MachineError(f"namespace machine {self.name} is not running")
        return [
            "nsenter",
            "--target",
            str(self.init_pid),
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
        ]

    def run(
        self,
        argv: list[str],
        timeout: float = 120.0,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside the machine and wait for it."""
        done = subprocess.run(
            [*self._nsenter(), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd="/",
            env={"PATH": PATH, **(env or {})},
            check=False,
        )
        if check and done.returncode != 0:
            raise MachineError(
                f"{self.name}: {' '.join(argv)} exited {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )
        return done

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Daemon:
        """Start a daemon inside the machine; its output goes to <work dir>/log/<name>.log."""
        log = self.work_dir / "log" / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [*self._nsenter(), *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                cwd="/",
                env={"PATH": PATH, **(env or {})},
                start_new_session=True,
            )
        daemon = self.daemons[name] = Daemon(name, log, proc)
        deadline = time.monotonic() + 5.0
        while (
            proc.poll() is None and time.monotonic() < deadline
        ):  # until nsenter's child runs argv
            pid = daemon.host_pid()
            with contextlib.suppress(OSError):
                if pid and Path(f"/proc/{pid}/comm").read_text().strip() != "nsenter":
                    break
            time.sleep(0.01)
        return daemon

    def stop_daemon(self, name: str, timeout: float = 15.0) -> None:
        daemon = self.daemons.pop(name)
        pid = daemon.host_pid()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            daemon.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pid = daemon.host_pid()
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            daemon.proc.wait(timeout=timeout)

    def host_pids(self) -> list[int]:
        """The host PIDs of every process of the machine: those in its PID namespace and
        their descendants (containers run in PID namespaces of their own, under shims)."""
        return pid_namespace_pids(self.init_pid)

    def rss_kib(self) -> dict[str, int]:
        """Resident memory (KiB) of the machine's processes, summed by command name."""
        return _rss_kib(self.host_pids())

    def stop(self, timeout: float = 20.0) -> None:
        """End the machine and everything in it; remove its cgroups, veth and work dir."""
        if self._unshare is not None:
            if self.init_pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.init_pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._unshare.pid, signal.SIGKILL)
            self._unshare.wait(timeout=timeout)
            deadline = time.monotonic() + timeout
            while self.host_pids() and time.monotonic() < deadline:
                time.sleep(0.1)
            self._unshare = None
        for daemon in self.daemons.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.proc.wait(timeout=timeout)
        self.daemons.clear()
        self.init_pid = 0
        with contextlib.suppress(MachineError):  # gone with the namespace, normally
            _ip("link", "del", self.veth)
        deadline = time.monotonic() + timeout
        self._remove_cgroups()
        while self._leftover_cgroups() and time.monotonic() < deadline:
            time.sleep(0.2)  # tasks of killed processes leave their cgroups a moment later
            self._remove_cgroups()
        if not self.keep:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _leftover_cgroups(self) -> list[Path]:
        return [
            h / self.cgroup_root.lstrip("/")
            for h in self._hierarchies(with_unified=True)
            if (h / self.cgroup_root.lstrip("/")).exists()
        ]
