"""Processes seen from the root namespace: namespace ids, liveness, memory, and ending them."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class NsProcess:
    """A process inside the host's network namespace, as seen from the root namespace."""

    pid: int
    comm: str
    rss_mib: float
    pss_mib: float  # RSS with shared pages split among their users: sums to real use
    cpu_s: float


def in_netns(netns_id: str) -> list[NsProcess]:
    """Every process whose network namespace is ``netns_id`` (as readlink /proc/PID/ns/net)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or ns_id(int(entry.name), "net") != netns_id:
            continue
        try:
            status = (entry / "status").read_text()
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss_mib = int(fields.get("VmRSS", "0 kB").split()[0]) / 1024
        cpu_s = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        found.append(
            NsProcess(int(entry.name), fields["Name"].strip(), rss_mib, pss_mib(entry), cpu_s)
        )
    return found


def children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except OSError:
        return []


def ns_id(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def pss_mib(proc: Path) -> float:
    try:
        rollup = (proc / "smaps_rollup").read_text()
    except OSError:
        return 0.0
    kib = [line.split()[1] for line in rollup.splitlines() if line.startswith("Pss:")]
    return int(kib[0]) / 1024 if kib else 0.0


def end(proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """Terminate a child we started (by its PID), then kill it if it lingers."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)
