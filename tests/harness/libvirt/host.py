"""A real libvirtd + QEMU for tests, in namespaces of its own, torn down to the last process.

``LibvirtHost`` starts ``libvirtd`` as PID 1's child in a fresh PID + network + mount namespace
(``ns_init.sh``), with all of libvirt's state under a temporary work dir, and creates an isolated
libvirt network (bridge + dnsmasq DHCP) inside it. Clients in the root namespace reach it through
``uri`` (``qemu+unix:///system?socket=<workdir>/run/libvirt-sock``); guest addresses exist only
inside the network namespace, which ``run_in_netns`` enters.

Why this shape:
- nothing on the host changes: no /etc file, no user, no bridge, no iptables rule, no named
  netns, no mount outside libvirtd's own mount namespace;
- instances never collide: each claims a slot (an flock held while it runs) that gives it a
  unique /24, bridge and network name, and has its own work dir and namespaces;
- nothing outlives it: ``stop`` destroys domains and the network through libvirt, then ends
  libvirtd; when the namespace's PID 1 ends, the kernel kills whatever is left in it (qemu,
  dnsmasq) and the network namespace goes with its last process. Should the test process die
  without ``stop``, ``setpriv --pdeathsig`` + ``unshare --kill-child`` end that PID 1 too.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.harness.libvirt import domain, procs
from tests.harness.libvirt.guest import GuestImage, cache_root, ensure_guest
from tests.harness.libvirt.prereq import missing_prerequisites

HERE = Path(__file__).resolve().parent
NS_INIT = HERE / "ns_init.sh"
TEST_DRIVER_URI = "test:///default"
SLOTS = 64
SUBNET_PREFIX = "10.213"  # slot N gets 10.213.N.0/24, inside its own network namespace only
SLOT_DIR = Path(tempfile.gettempdir()) / "shoal-libvirt-slots"


QEMU_CONF = """\
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
stdio_handler = "file"
"""
LIBVIRTD_CONF = """\
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
"""
_HTTP_GET = """
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])) as answer:
    sys.stdout.write(answer.read().decode())
"""
READY_RE = re.compile(r"SHOAL-READY node=(\S*) ip=(\S*) uptime=(\S+)")


def no_daemon_uri() -> str:
    """The URI of libvirt's in-process test driver: no daemon, no root (for contract tests)."""
    return TEST_DRIVER_URI


class HostUnavailable(RuntimeError):
    """This machine cannot run a LibvirtHost; the message says what is missing."""


class HostError(RuntimeError):
    """A LibvirtHost failed to start or stop; the message carries the log tail."""


@dataclass(frozen=True)
class Ready:
    """A guest's ``SHOAL-READY`` console line."""

    node: str
    ip: str
    uptime: float


def _keep_from_env() -> bool:
    return any(
        os.environ.get(v, "") in ("1", "true", "yes") for v in ("SHOAL_LIBVIRT_KEEP", "KEEP")
    )


def _claim_slot() -> tuple[int, IO[str]]:
    """The first free slot; held (flock) until the returned file is closed or the process ends."""
    SLOT_DIR.mkdir(mode=0o755, exist_ok=True)
    for slot in range(SLOTS):
        lock = open(SLOT_DIR / f"{slot}.lock", "w")  # noqa: SIM115 (held while the host runs)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return slot, lock
    raise HostError(f"all {SLOTS} libvirt host slots under {SLOT_DIR} are taken")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not readable)"


class LibvirtHost:
    """A running libvirtd with an isolated network, for tests; a context manager.

    ``keep`` (default: env ``SHOAL_LIBVIRT_KEEP=1`` or ``KEEP=1``) leaves everything running at
    ``stop`` and prints how to reach and later remove it (``python -m tests.harness.libvirt down
    WORKDIR``).
    """

    def __init__(
        self,
        *,
        keep: bool | None = None,
        guest: GuestImage | None = None,
        workdir_parent: Path | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.keep = _keep_from_env() if keep is None else keep
        self._guest = guest
        self._workdir_parent = workdir_parent
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._slot_lock: IO[str] | None = None
        self._spawned: list[subprocess.Popen[Any]] = []
        self._consoles: dict[str, Path] = {}
        self._stopped = False
        self.slot = -1
        self.workdir = Path()
        self.init_pid = 0
        self.netns_id = ""
        # an open handle on the network namespace keeps its id from being reused by another
        # namespace while this host still scans /proc for it (see stop)
        self._netns_fd = -1
        self.pidns_id = ""
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ what tests use
    @property
    def guest(self) -> GuestImage:
        assert self._guest is not None, "start() the host first"
        return self._guest

    @property
    def kernel(self) -> Path:
        return self.guest.kernel

    @property
    def initrd(self) -> Path:
        return self.guest.initrd

    @property
    def uri(self) -> str:
        return f"qemu+unix:///system?socket={self.workdir}/run/libvirt-sock"

    @property
    def network(self) -> str:
        return f"shoal{self.slot}"

    @property
    def bridge(self) -> str:
        return f"shoalbr{self.slot}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"{SUBNET_PREFIX}.{self.slot}.0/24")

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def address(self, index: int) -> str:
        """The static address for guest ``index`` (0-89: .10-.99; DHCP hands out .100-.250)."""
        if not 0 <= index < 90:
            raise ValueError(f"static guest index {index} is outside 0..89")
        return str(self.subnet.network_address + 10 + index)

    def ip_arg(self, address: str, hostname: str) -> str:
        """The guest kernel command line's ``ip=`` for a static ``address`` on this network."""
        return domain.static_ip_arg(address, self.gateway, self.subnet.prefixlen, hostname)

    def console_path(self, name: str) -> Path:
        """Where :meth:`domain_xml` puts the serial console file of domain ``name``."""
        return self.workdir / "vms" / f"{name}.console"

    def domain_xml(
        self,
        name: str,
        *,
        address: str | None = None,
        cmdline: str = "",
        metadata: str = "",
        node: str | None = None,
    ) -> str:
        """A tiny guest on this host's network: static ``address``, or DHCP when None.

        ``cmdline``, ``metadata`` and ``node``: see :func:`domain.tiny_domain_xml`.
        """
        ip = self.ip_arg(address, node or name) if address else "ip=dhcp"
        return domain.tiny_domain_xml(
            name,
            kernel=self.kernel,
            initrd=self.initrd,
            network=self.network,
            console=self.console_path(name),
            cmdline=f"{ip} {cmdline}".strip(),
            metadata=metadata,
            node=node,
        )

    def serial_log(self, name: str) -> str:
        """The serial console output of domain ``name`` so far ('' before it starts)."""
        path = self._consoles.get(name) or self._console_from_xml(name) or self.console_path(name)
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, name: str, timeout: float = 120.0) -> Ready:
        """Wait (bounded) for domain ``name``'s ``SHOAL-READY`` line; TimeoutError with the log."""
        deadline = time.monotonic() + timeout
        while True:
            match = READY_RE.search(self.serial_log(name))
            if match:
                return Ready(match[1], match[2], float(match[3]))
            if time.monotonic() > deadline:
                tail = "\n".join(self.serial_log(name).splitlines()[-20:])
                raise TimeoutError(f"{name}: no SHOAL-READY in {timeout:.0f}s; console:\n{tail}")
            time.sleep(0.1)

    def run_in_netns(
        self, cmd: Sequence[str], *, timeout: float = 30.0, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` in the host's network namespace (the root mount namespace stays)."""
        return subprocess.run(
            ["nsenter", f"--net=/proc/{self.init_pid}/ns/net", "--", *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            stdin=subprocess.DEVNULL,
        )

    def spawn_in_netns(self, cmd: Sequence[str], **popen: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` in the network namespace in the background; ``stop`` ends it by PID."""
        proc: subprocess.Popen[Any] = subprocess.Popen(
            ["nsenter", f"--net=/proc/{self.init_pid}/ns/net", "--", *cmd],
            start_new_session=True,
            **popen,
        )
        self._spawned.append(proc)
        return proc

    def http_get(self, address: str, path: str = "/", timeout: float = 3.0) -> str | None:
        """GET http://address/path from inside the namespace; the body, or None on failure.

        Python's urllib, not busybox wget: busybox-static's wget crashes in glibc's NSS on hosts
        that have an /etc/nsswitch.conf.
        """
        url = f"http://{address}/{path.lstrip('/')}"
        try:
            done = self.run_in_netns(
                [sys.executable, "-c", _HTTP_GET, url, str(timeout)], timeout=timeout + 10
            )
        except subprocess.TimeoutExpired:
            return None
        return done.stdout if done.returncode == 0 else None

    def wait_http(self, address: str, path: str = "/", timeout: float = 30.0) -> str:
        """Wait (bounded) until http://address/path answers; its body, or TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            body = self.http_get(address, path, timeout=2.0)
            if body is not None:
                return body
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"http://{address}/{path.lstrip('/')} did not answer in {timeout:.0f}s"
                )
            time.sleep(0.2)

    def virsh(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``virsh -c <uri> ARGS`` (no check: look at returncode)."""
        return subprocess.run(
            ["virsh", "-q", "-c", self.uri, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def processes(self) -> list[procs.NsProcess]:
        """Every process in the host's network namespace: libvirtd, dnsmasq, qemu, helpers."""
        if self._netns_fd < 0:  # not started or stopped: its id may belong to another now
            return []
        return procs.in_netns(self.netns_id)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LibvirtHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LibvirtHost:
        """Start libvirtd and the network; HostUnavailable when the machine cannot."""
        missing = missing_prerequisites()
        if missing:
            raise HostUnavailable("; ".join(missing))
        t0 = time.monotonic()
        if self._guest is None:
            self._guest = ensure_guest()
        self.timings["guest"] = time.monotonic() - t0
        self.slot, self._slot_lock = _claim_slot()
        parent = self._workdir_parent or Path(tempfile.gettempdir())
        if len(str(parent)) > 60:  # the socket path must fit in sun_path (108 bytes)
            parent = Path("/tmp")
        self.workdir = Path(tempfile.mkdtemp(prefix=f"shoal-lv{self.slot}-", dir=parent))
        try:
            self._prepare_workdir()
            t1 = time.monotonic()
            self._spawn()
            self._wait_for_libvirtd()
            self.timings["libvirtd"] = time.monotonic() - t1
            self._save_qemu_caps()
            t2 = time.monotonic()
            self._start_network()
            self.timings["network"] = time.monotonic() - t2
            self._write_state()
        except BaseException as exc:
            self.keep = False
            try:
                self.stop()
            except HostError as cleanup:
                exc.add_note(f"and cleaning up after it: {cleanup}")
            raise
        if not self.keep:
            atexit.register(self.stop)
        return self

    def stop(self) -> None:
        """Destroy domains and the network, end libvirtd and its namespaces; idempotent.

        With ``keep``, leaves everything running and prints where it is instead.
        """
        if self._stopped or not self.workdir.parts:
            return
        if self.keep:
            self._stopped = True
            print(f"\n{self.describe()}")
            return
        self._stopped = True
        atexit.unregister(self.stop)
        problems = []
        if self.init_pid and procs.alive(self.init_pid):
            problems += self._destroy_libvirt_objects()
        for proc in self._spawned:
            procs.end(proc)
        self._end_namespace()
        left = self.processes()
        for proc_info in left:  # nsenter'd by this host (run_in_netns), nothing else can be there
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc_info.pid, signal.SIGKILL)
        self._release_netns()
        if self._slot_lock is not None:
            self._slot_lock.close()
            self._slot_lock = None
        if left or problems:
            raise HostError(f"libvirt host {self.workdir} stopped with leftovers {left} {problems}")
        shutil.rmtree(self.workdir, ignore_errors=True)

    def describe(self) -> str:
        """How to reach this host by hand, and how to remove it (printed with KEEP=1)."""
        w = self.workdir
        return "\n".join(
            (
                f"libvirt host in slot {self.slot}, work dir {w}:",
                f"  virsh -c '{self.uri}' list --all",
                f"  nsenter --net=/proc/{self.init_pid}/ns/net curl -s http://{self.address(0)}/",
                f"  network {self.network}, bridge {self.bridge}, {self.subnet} via {self.gateway}",
                f"  logs: {w}/log/libvirtd.log, {w}/log/qemu/*.log, consoles {w}/vms/*.console",
                f"  remove: python -m tests.harness.libvirt down {w}",
            )
        )

    @classmethod
    def attach(cls, workdir: Path) -> LibvirtHost:
        """The kept host whose state is in ``workdir`` (to stop it: ``attach(w).stop()``)."""
        state = json.loads((workdir / "state.json").read_text())
        host = cls(keep=False)
        host.workdir = workdir
        host.slot = state["slot"]
        host.init_pid = state["init_pid"]
        host.netns_id = state["netns_id"]
        host.pidns_id = state["pidns_id"]
        if procs.ns_id(host.init_pid, "pid") == host.pidns_id:
            host._hold_netns()
        else:
            host.init_pid = 0  # gone, or the PID now belongs to someone else: never signal it
            host.netns_id = ""
        return host

    # ------------------------------------------------------------------ internals
    def _prepare_workdir(self) -> None:
        w = self.workdir
        for sub in ("etc", "run", "lib", "log", "cache/qemu/capabilities", "vms"):
            (w / sub).mkdir(parents=True, exist_ok=True)
        (w / "etc" / "qemu.conf").write_text(QEMU_CONF)
        (w / "etc" / "libvirtd.conf").write_text(LIBVIRTD_CONF)
        passwd = [
            ln
            for ln in Path("/etc/passwd").read_text().splitlines()
            if not ln.startswith("libvirt-qemu:")
        ]
        group = [
            ln
            for ln in Path("/etc/group").read_text().splitlines()
            if not ln.startswith("libvirt-qemu:")
        ]
        passwd.append("libvirt-qemu:x:64055:64055:libvirt-qemu:/var/lib/libvirt:/usr/sbin/nologin")
        group.append("libvirt-qemu:x:64055:")
        (w / "passwd").write_text("\n".join(passwd) + "\n")
        (w / "group").write_text("\n".join(group) + "\n")
        # libvirtd probes QEMU for ~8 s when its capabilities cache is empty: seed it
        caps = _qemu_caps_cache()
        if caps.is_dir():
            for xml in caps.glob("*.xml"):
                shutil.copy2(xml, w / "cache" / "qemu" / "capabilities" / xml.name)

    def _spawn(self) -> None:
        cmd = [
            "unshare",
            "--pid",
            "--kill-child",
            "--net",
            "--mount-proc",
            "--propagation",
            "private",
        ]
        cmd += ["sh", str(NS_INIT), str(self.workdir)]
        if not self.keep and threading.current_thread() is threading.main_thread():
            # the parent-death signal is tied to the forking thread: only the main one is safe
            cmd = ["setpriv", "--pdeathsig", "KILL", *cmd]
        with open(self.workdir / "init.out", "wb") as out:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C goes to the tests, which then call stop()
            )  # fmt: skip
        deadline = time.monotonic() + 10
        while not self.init_pid:
            kids = procs.children(self._proc.pid)
            if kids:
                self.init_pid = kids[0]
            elif self._proc.poll() is not None or time.monotonic() > deadline:
                raise HostError(
                    f"unshare did not start ns_init.sh:\n{_tail(self.workdir / 'init.out')}"
                )
            else:
                time.sleep(0.01)
        deadline = time.monotonic() + 10
        while True:  # unshare forks before it unshares the namespaces
            self.pidns_id = procs.ns_id(self.init_pid, "pid") or ""
            self.netns_id = procs.ns_id(self.init_pid, "net") or ""
            if self.netns_id and self.netns_id != procs.ns_id(os.getpid(), "net"):
                self._hold_netns()
                break
            if time.monotonic() > deadline:
                raise HostError("ns_init.sh never entered its own network namespace")
            time.sleep(0.01)

    def _wait_for_libvirtd(self) -> None:
        deadline = time.monotonic() + self._start_timeout
        while True:
            if self.virsh("version", timeout=30).returncode == 0:
                return
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise HostError(f"libvirtd ended at start:\n{self._logs()}")
            if time.monotonic() > deadline:
                raise HostError(
                    f"libvirtd did not answer in {self._start_timeout:.0f}s:\n{self._logs()}"
                )
            time.sleep(0.1)

    def _logs(self) -> str:
        w = self.workdir
        return "\n".join(
            f"--- {p.name}:\n{_tail(p)}"
            for p in (w / "init.out", w / "libvirtd.out", w / "log" / "libvirtd.log")
        )

    def _save_qemu_caps(self) -> None:
        cache = _qemu_caps_cache()
        cache.mkdir(parents=True, exist_ok=True)
        for xml in (self.workdir / "cache" / "qemu" / "capabilities").glob("*.xml"):
            target = cache / xml.name
            if not target.exists() or target.read_bytes() != xml.read_bytes():
                tmp = cache / f".{xml.name}.{os.getpid()}"
                shutil.copy2(xml, tmp)
                tmp.rename(target)  # atomic: a concurrent host reads the old or the new file

    def _start_network(self) -> None:
        xml = domain.isolated_network_xml(self.network, self.bridge, self.subnet)
        path = self.workdir / "network.xml"
        path.write_text(xml)
        for args in (("net-define", str(path)), ("net-start", self.network)):
            done = self.virsh(*args)
            if done.returncode != 0:
                raise HostError(f"virsh {' '.join(args)}: {done.stderr.strip()}\n{self._logs()}")

    def _write_state(self) -> None:
        state = {
            "slot": self.slot,
            "init_pid": self.init_pid,
            "netns_id": self.netns_id,
            "pidns_id": self.pidns_id,
            "uri": self.uri,
            "owner_pid": os.getpid(),
        }
        (self.workdir / "state.json").write_text(json.dumps(state, indent=1) + "\n")

    def _console_from_xml(self, name: str) -> Path | None:
        done = self.virsh("dumpxml", name, timeout=30)
        if done.returncode != 0:
            return None
        source = ET.fromstring(done.stdout).find("./devices/serial[@type='file']/source")
        if source is None or not source.get("path"):
            return None
        self._consoles[name] = Path(source.get("path", ""))
        return self._consoles[name]

    def _destroy_libvirt_objects(self) -> list[str]:
        problems = []
        names = self.virsh("list", "--all", "--name", timeout=30)
        for name in filter(None, map(str.strip, names.stdout.splitlines())):
            self.virsh("destroy", name, timeout=60)  # fails harmlessly when already shut off
            done = self.virsh("undefine", name, timeout=60)
            if done.returncode != 0:
                problems.append(f"undefine {name}: {done.stderr.strip()}")
        nets = self.virsh("net-list", "--all", "--name", timeout=30)
        for name in filter(None, map(str.strip, nets.stdout.splitlines())):
            self.virsh("net-destroy", name, timeout=60)  # stops its dnsmasq
            self.virsh("net-undefine", name, timeout=60)
        return problems

    def _hold_netns(self) -> None:
        fd = os.open(f"/proc/{self.init_pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        if f"net:[{os.fstat(fd).st_ino}]" != self.netns_id:
            os.close(fd)
            raise HostError(f"PID {self.init_pid} left network namespace {self.netns_id}")
        self._netns_fd = fd

    def _release_netns(self) -> None:
        if self._netns_fd >= 0:
            os.close(self._netns_fd)
            self._netns_fd = -1
        self.netns_id = ""

    def _end_namespace(self) -> None:
        """SIGTERM to the namespace's PID 1 (it stops libvirtd, then ends), SIGKILL if it must."""
        if not self.init_pid or procs.ns_id(self.init_pid, "pid") != self.pidns_id:
            self.init_pid = 0  # never started, already gone, or the PID is someone else's now
            if self._proc is not None:
                procs.end(self._proc)
            return
        for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, sig)
            if self._wait_init_gone(wait):
                break
        if self._proc is not None:
            procs.end(self._proc)
        if procs.alive(self.init_pid):
            raise HostError(f"the namespace's PID 1 ({self.init_pid}) survived SIGKILL")

    def _wait_init_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None:
                self._proc.poll()  # reaps unshare once its child (PID 1) has ended
            if not procs.alive(self.init_pid):
                return True
            time.sleep(0.05)
        return False


def _qemu_caps_cache() -> Path:
    return cache_root().parent / "libvirt-qemu-caps"
