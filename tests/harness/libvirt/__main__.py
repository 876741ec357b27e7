"""Run the libvirt test host by hand (as root, from the repository root).

  python -m tests.harness.libvirt guest          build (or find) the cached guest, print its paths
  python -m tests.harness.libvirt up [--vms N]   start a host, boot N tiny VMs, wait for Ctrl-C
  python -m tests.harness.libvirt up --keep ...  the same, then exit and leave it all running
  python -m tests.harness.libvirt bench N        start, boot N VMs, print timings and RAM, stop
  python -m tests.harness.libvirt down WORKDIR   stop a kept host (destroys its VMs)

Uses only virsh, not libvirt-python, so the system python3 runs it too.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.harness.libvirt.guest import ensure_guest
from tests.harness.libvirt.host import LibvirtHost


def _available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return -1


def _answers(host: LibvirtHost, index: int, name: str) -> bool:
    return (host.http_get(host.address(index), timeout=2) or "").strip() == name


def boot(host: LibvirtHost, count: int, parallel: int = 4, timeout: float = 300.0) -> None:
    """Define + start ``count`` tiny VMs (``parallel`` virsh calls at once), wait, report."""
    if count <= 0:
        return
    print(f"host memory available before: {_available_mib()} MiB")
    names = [f"tiny-{i}" for i in range(count)]
    t0 = time.monotonic()

    def start(index: int) -> float:
        name = names[index]
        path = host.workdir / f"{name}.xml"
        path.write_text(host.domain_xml(name, address=host.address(index)))
        for args in (("define", str(path)), ("start", name)):
            done = host.virsh(*args)
            if done.returncode != 0:
                raise RuntimeError(f"virsh {' '.join(args)}: {done.stderr.strip()}")
        return time.monotonic() - t0

    with ThreadPoolExecutor(parallel) as pool:
        created = list(pool.map(start, range(count)))
    print(f"{count} domains defined + started in {max(created):.1f}s ({parallel} at a time)")
    ready: dict[str, float] = {}
    answered: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(answered) < count and time.monotonic() < deadline:
        for i, name in enumerate(names):
            if name not in ready and "SHOAL-READY" in host.serial_log(name):
                ready[name] = time.monotonic() - t0
            if name in ready and name not in answered and _answers(host, i, name):
                answered[name] = time.monotonic() - t0
        time.sleep(0.1)
    qemus = [p for p in host.processes() if p.comm.startswith("qemu")]
    nan = float("nan")
    for name in names:
        print(f"  {name}: ready {ready.get(name, nan):.1f}s, HTTP {answered.get(name, nan):.1f}s")
    if answered:
        values = list(answered.values())
        print(
            f"answered {len(answered)}/{count}: all by {max(values):.1f}s, "
            f"median {statistics.median(values):.1f}s after the first define"
        )
    if qemus:
        print(
            f"qemu per VM: RSS {statistics.mean(p.rss_mib for p in qemus):.0f} MiB, "
            f"PSS {statistics.mean(p.pss_mib for p in qemus):.0f} MiB; "
            f"{sum(p.pss_mib for p in qemus):.0f} MiB PSS in all; "
            f"CPU {statistics.mean(p.cpu_s for p in qemus):.1f}s each to boot"
        )
    others = [
        f"{p.comm} {p.pss_mib:.0f}" for p in host.processes() if not p.comm.startswith("qemu")
    ]
    print(f"the rest of the namespace (MiB PSS): {', '.join(others)}")
    if len(answered) < count:
        raise SystemExit(f"only {len(answered)}/{count} VMs answered in {timeout:.0f}s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.libvirt")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("guest")
    up = sub.add_parser("up")
    up.add_argument("--vms", type=int, default=0)
    up.add_argument("--keep", action="store_true", help="exit and leave it running")
    bench = sub.add_parser("bench")
    bench.add_argument("count", type=int)
    bench.add_argument("--parallel", type=int, default=4)
    down = sub.add_parser("down")
    down.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)

    if args.cmd == "guest":
        t0 = time.monotonic()
        image = ensure_guest()
        print(f"{image.key} ({time.monotonic() - t0:.1f}s)")
        print(f"  kernel {image.kernel}\n  initrd {image.initrd}")
    elif args.cmd == "down":
        LibvirtHost.attach(args.workdir).stop()
        print(f"stopped {args.workdir}")
    else:
        keep = args.cmd == "up" and args.keep
        t0 = time.monotonic()
        with LibvirtHost(keep=keep or None) as host:
            print(
                f"up in {time.monotonic() - t0:.1f}s: "
                + ", ".join(f"{k} {v:.1f}s" for k, v in host.timings.items())
            )
            boot(host, args.vms if args.cmd == "up" else args.count, getattr(args, "parallel", 4))
            if args.cmd == "up" and not host.keep:
                print(host.describe().rsplit("\n", 1)[0] + "\nCtrl-C stops it.")
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass
            t1 = time.monotonic()
        if not keep:
            print(f"stopped in {time.monotonic() - t1:.1f}s")


if __name__ == "__main__":
    main()
