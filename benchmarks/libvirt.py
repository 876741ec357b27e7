"""`./run bench libvirt`: N real tiny VMs to "answers on its address", through shoal and
through a plain libvirt-python loop with the same parallelism, in one run.

Both sides boot the same domains (the same template, overlay disk, kernel command line
with user data) on one real libvirtd + QEMU (tests/harness/libvirt, as root), and both
are timed the same way: from the first request until the last VM answers HTTP on its
address, as seen by one poller process inside the host's network namespace. The plain
loop creates the overlay, defines and starts each domain on P threads and learns
addresses from the network's DHCP leases; shoal gets one cluster create over its API
(1 master + N-1 workers, P calls at a time per host) and reports addresses in its node
list. The runs alternate (plain, shoal, shoal, plain, twice) so that drift in the
machine's load falls on both sides; the ratio is of the sums. shoal's server CPU per
node (create and delete) is printed: the guests need the two cores.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.harness import Deployment, check
from benchmarks.scenarios import Row

TARGET = 1.10
# A process in the host's network namespace: reads addresses on stdin, prints
# "<address> <CLOCK_MONOTONIC seconds>" once each answers HTTP (the clock is the
# machine's, so the benchmark compares it with its own).
POLLER = """
import sys, threading, time, urllib.request
def poll(addr):
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{addr}/", timeout=1) as r:
                r.read()
            print(addr, time.monotonic(), flush=True)
            return
        except Exception:
            time.sleep(0.05)
for line in sys.stdin:
    threading.Thread(target=poll, args=(line.strip(),), daemon=True).start()
"""


class Poller:
    """Watches addresses from inside the namespace; `answered` holds when each did."""

    def __init__(self, host: Any) -> None:
        self.proc = host.spawn_in_netns(
            [sys.executable, "-c", POLLER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.answered: dict[str, float] = {}
        self.sent: set[str] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            addr, at = line.split()
            self.answered[addr] = float(at)

    def watch(self, addr: str) -> None:
        if addr not in self.sent:
            self.sent.add(addr)
            assert self.proc.stdin is not None
            self.proc.stdin.write(addr + "\n")

    def reset(self) -> None:
        self.answered.clear()
        self.sent.clear()


def _until(done: Callable[[], bool], timeout: float, what: str, every: float = 0.5) -> None:
    """Ask `done` every half second (both sides alike: the guests need the CPU more than
    the benchmark needs a fresher address) until it says yes."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s: {what}")
        time.sleep(every)


def plain_loop(host: Any, settings: Any, n: int, parallel: int, poller: Poller) -> float:
    """N domains with libvirt-python alone; seconds until the last one answers."""
    import libvirt

    from shoal.drivers.contract import MachineSpec
    from shoal.drivers.libvirt import template, volumes

    libvirt.registerErrorHandler(lambda _c, _e: None, None)
    conn = libvirt.open(host.uri)
    image, flavor = settings.images[0], settings.flavors[0]
    tmpl = template.load(settings)
    ids = [str(uuid.uuid4()) for _ in range(n)]
    macs: dict[str, str] = {}

    def one(i: int) -> None:
        mid = ids[i]
        spec = MachineSpec(mid, f"plain-{i}", "p", "c", "g", "worker", flavor.name, image.name,
                           user_data=_user_data(mid, f"plain-{i}"))  # fmt: skip
        disk = volumes.make_overlay(conn, settings.pool, "h1", mid, image.name, image.disk, 0)
        mac = template.mac_for(mid, ())
        # no shoal metadata: shoal's sweeper would take shoal-tagged domains that no node
        # row owns for orphans, and delete them
        d = template.Domain("h1", flavor, image, mac, disk, "")
        conn.defineXML(template.render(tmpl, settings, spec, d)).create()
        macs[mac] = mid

    start = time.monotonic()
    try:
        with ThreadPoolExecutor(parallel) as pool:
            futures = [pool.submit(one, i) for i in range(n)]
            net = conn.networkLookupByName(settings.network)

            def all_answered() -> bool:
                for lease in net.DHCPLeases():
                    if lease["mac"].lower() in macs:
                        poller.watch(lease["ipaddr"])
                return len(poller.answered) >= n

            _until(all_answered, 600, "plain libvirt VMs to answer")
            for f in futures:
                f.result()
        return max(poller.answered.values()) - start
    finally:
        for mid in ids:
            try:
                dom = conn.lookupByUUIDString(mid)
                dom.destroy()
                dom.undefine()
            except libvirt.libvirtError:
                pass
            volumes.delete_all(conn, settings.pool, mid)
        conn.close()


def _user_data(mid: str, name: str) -> str:
    """User data of the size shoal renders (the bootstrap's #cloud-config)."""
    from shoal.domain import bootstrap

    who = bootstrap.NodeIdentity(mid, name, "c", "g", "p", "worker")
    return bootstrap.user_data(who, "http://127.0.0.1:9511")


def through_shoal(dep: Deployment, n: int, poller: Poller, name: str) -> float:
    """One cluster of N VMs through shoal's API; seconds until the last one answers."""
    with dep.client() as c:
        body = {
            "name": name,
            "image_id": "tiny",
            "node_groups": [
                {"name": "m", "role": "master", "flavor_id": "tiny", "node_count": 1},
                {"name": "w", "flavor_id": "tiny", "node_count": n - 1},
            ],
        }
        start = time.monotonic()
        check(c.post("/clusters", json=body), 202)

        def all_answered() -> bool:
            for node in c.get(f"/clusters/{name}/nodes").json()["nodes"]:
                if node["address"]:
                    poller.watch(node["address"])
            return len(poller.answered) >= n

        _until(all_answered, 600, "shoal's VMs to answer")
        wall = max(poller.answered.values()) - start
        check(c.delete(f"/clusters/{name}"), 204)
        _until(lambda: c.get(f"/clusters/{name}").status_code == 404, 300, "cluster delete")
        return wall


def libvirt_vms(n: int = 10, parallel: int = 4, rounds: int = 2) -> list[Row]:
    """The scenario: (plain, shoal, shoal, plain) x rounds; the ratio of the sums."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.harness
    from tests.harness.libvirt import LibvirtHost, missing_prerequisites
    from tests.harness.libvirt.provider import prepare

    missing = missing_prerequisites()
    if missing:
        return [Row("libvirt", n, 0.0, note="skipped: " + "; ".join(missing))]
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-libvirt-"))
    try:
        plain, shoal, cpu = _runs(LibvirtHost, prepare, work, n, parallel, rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = sum(shoal) / sum(plain)
    runs = len(plain)
    return [
        Row("libvirt: plain libvirt-python", n, sum(plain) / runs,
            note=f"P={parallel}; runs {_fmt(plain)} s"),
        Row("libvirt: shoal", n, sum(shoal) / runs, cpu_ms_per_node=1000 * cpu / (runs * n),
            lower_bound_s=sum(plain) / runs, target=f"ratio <= {TARGET}", ok=ratio <= TARGET,
            note=f"runs {_fmt(shoal)} s; to 'answers on its address'"),
    ]  # fmt: skip


def _runs(
    host_class: Any, prepare: Any, work: Path, n: int, parallel: int, rounds: int
) -> tuple[list[float], list[float], float]:
    """(plain, shoal, shoal, plain) x rounds on one host: the seconds of each side's runs,
    and the CPU seconds shoal's server spent in its runs (its create and delete)."""
    with host_class() as host:
        setup = prepare(host, work, cores=4 * n, ram_mb=256 * n, concurrency_per_target=parallel)
        settings = _settings(setup.config)
        poller = Poller(host)
        env = {"SHOAL_CONFIG": str(setup.config)}  # shoal's defaults otherwise
        plain: list[float] = []
        shoal: list[float] = []
        cpu = 0.0
        with Deployment(env_extra=env, workdir=work) as dep:
            for i, side in enumerate(("plain", "shoal", "shoal", "plain") * rounds):
                poller.reset()
                if side == "plain":
                    plain.append(plain_loop(host, settings, n, parallel, poller))
                else:
                    before = dep.cpu_seconds()
                    shoal.append(through_shoal(dep, n, poller, f"bench-{i}"))
                    cpu += dep.cpu_seconds() - before
    return plain, shoal, cpu


def _fmt(xs: list[float]) -> str:
    return " / ".join(f"{x:.1f}" for x in xs)


def _settings(config: Path) -> Any:
    """The provider's typed settings, read from the same file shoal reads."""
    from shoal.settings import Settings

    s = Settings.from_env(env={"SHOAL_CONFIG": str(config)})
    return dataclasses.replace(s.providers[0].options)


def main() -> None:  # python -m benchmarks.libvirt: the raw figures as JSON
    rows = libvirt_vms()
    print(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
