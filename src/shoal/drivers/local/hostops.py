"""What a namespace machine needs from the host: `ip`, cgroups, and the processes of a
PID namespace. Shared by the local driver and the test harness's machines
(tests/harness/kubernetes/machine.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOLS = ("unshare", "nsenter", "setpriv", "ip", "mount")


class MachineError(RuntimeError):
    """A namespace machine could not be started or a command in it failed."""


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise MachineError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def missing_prerequisites() -> str:
    """Why namespace machines cannot run here, or ""."""
    if os.geteuid() != 0:
        return "namespace machines need root"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"namespace machines need {', '.join(missing)} on the host"
    if not Path("/proc/self/ns/cgroup").exists() or not Path("/proc/self/ns/pid").exists():
        return "namespace machines need PID and cgroup namespaces (kernel support)"
    return ""


def hierarchies(with_unified: bool = False) -> list[Path]:
    """The host's cgroup hierarchies (v1 controllers; with the hybrid cgroup2 mount too,
    where runc also makes cgroups: it is cleaned, not prepared)."""
    if not CGROUP_FS.is_dir():
        return []
    return [
        p
        for p in sorted(CGROUP_FS.iterdir())
        if p.is_dir() and not p.is_symlink() and (with_unified or p.name != "unified")
    ]


def make_cgroups(root: str) -> list[Path]:
    """Make cgroup `root` in every hierarchy (cpuset filled from its parent: an empty
    cpuset admits no task); returns each one's `cgroup.procs`."""
    procs: list[Path] = []
    for hierarchy in hierarchies(with_unified=True):
        own = hierarchy / root.lstrip("/")
        own.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (own / knob).exists() and not (own / knob).read_text().strip():
                (own / knob).write_text((hierarchy / knob).read_text())
        procs.append(own / "cgroup.procs")
    return procs


def remove_cgroups(root: str) -> None:
    for hierarchy in hierarchies(with_unified=True):
        own = hierarchy / root.lstrip("/")
        if not own.is_dir():
            continue
        dirs = sorted((p for p in own.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for d in [*dirs, own]:
            with contextlib.suppress(OSError):
                d.rmdir()


def leftover_cgroups(root: str) -> list[Path]:
    return [
        h / root.lstrip("/")
        for h in hierarchies(with_unified=True)
        if (h / root.lstrip("/")).exists()
    ]


def start_time(pid: int) -> int:
    """The start time (clock ticks since boot) of `pid`, 0 if it is gone: with the PID,
    what tells a process from a later one that reuses its number."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[19])


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def pid_namespace_pids(init_pid: int) -> list[int]:
    """The host PIDs of every process in `init_pid`'s PID namespace and their
    descendants (containers run in PID namespaces of their own, under shims)."""
    try:
        ns = os.readlink(f"/proc/{init_pid}/ns/pid") if init_pid else ""
    except OSError:
        return []
    kids: dict[int, list[int]] = {}
    inside: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                inside.append(int(entry))
    found: set[int] = set()
    while inside:
        pid = inside.pop()
        if pid not in found:
            found.add(pid)
            inside.extend(kids.get(pid, []))
    return sorted(found)


def rss_kib(pids: list[int]) -> dict[str, int]:
    """Resident memory (KiB) of `pids`, summed by command name."""
    totals: dict[str, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError, KeyError, ValueError):
            fields = dict(
                line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            )
            rss = int(fields.get("VmRSS", "0 kB").split()[0])
            name = fields["Name"].strip()
            totals[name] = totals.get(name, 0) + rss
    return totals
