"""A cluster's API load balancer on a local provider: a small TCP forwarder on the host,
bound to the cluster's reserved address (added to the provider's bridge) on the API
port, forwarding each connection to one of the cluster's masters that accepts it.

- Backends are the provider's own records: every machine tagged with the cluster and
  role master, not being deleted, whose processes run (`machines.json`), read at most
  once a second. A master that refuses or does not answer within `CONNECT_TIMEOUT` is
  passed over for `BACKOFF` seconds; connections are spread round-robin over the rest.
  Kubernetes clients speak TLS end to end through it: the API servers' certificates
  name the balancer's address (docs/kubernetes.md).
- It runs as a process of its own session (`python -m shoal.drivers.local.balancer`),
  so a stopped shoal leaves it serving, like the machines; the driver starts it when
  the address is reserved and again whenever it finds it gone (`ensure`), and stops it
  when the cluster is released. It stops by itself once its record or the bridge is
  gone (a test's leftover state dir, a deleted bridge).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from shoal.drivers.contract import TAG_CLUSTER, TAG_ROLE
from shoal.drivers.local import hostops, machines
from shoal.drivers.local.hostops import MachineError

API_PORT = 6443  # where a cluster's API servers listen, and so its balancer
CONNECT_TIMEOUT = 1.5
BACKOFF = 5.0
REFRESH = 1.0
STOP_TIMEOUT = 10.0


@dataclass
class Record:
    """What `balancers/<cluster id>.json` holds."""

    cluster_id: str
    address: str
    port: int
    pid: int = 0
    started: int = 0

    def alive(self) -> bool:
        return bool(self.pid) and hostops.start_time(self.pid) == self.started


def record_path(state_dir: Path, cluster_id: str) -> Path:
    return state_dir / "balancers" / f"{cluster_id}.json"


def read(state_dir: Path, cluster_id: str) -> Record | None:
    try:
        return Record(**json.loads(record_path(state_dir, cluster_id).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def every(state_dir: Path) -> list[Record]:
    root = state_dir / "balancers"
    if not root.is_dir():
        return []
    found = (read(state_dir, p.stem) for p in sorted(root.glob("*.json")))
    return [r for r in found if r is not None]


def _write(state_dir: Path, r: Record) -> None:
    path = record_path(state_dir, r.cluster_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(r), sort_keys=True))
    tmp.replace(path)


def ensure(
    state_dir: Path, cluster_id: str, address: str, bridge: str, env: dict[str, str]
) -> Record:
    """The cluster's balancer running on `address` (added to `bridge`): started unless
    its recorded process runs. Idempotent."""
    r = read(state_dir, cluster_id) or Record(cluster_id, address, API_PORT)
    if r.alive():
        return r
    with contextlib.suppress(MachineError):  # held already
        hostops.ip("addr", "add", f"{address}/32", "dev", bridge)
    _write(state_dir, r)  # before it starts: it stops once its record is gone
    log_dir = state_dir / "balancers"
    argv = [
        sys.executable, "-m", "shoal.drivers.local.balancer",
        "--state-dir", str(state_dir), "--cluster", cluster_id,
        "--listen", address, "--port", str(r.port), "--bridge", bridge,
    ]  # fmt: skip
    with (log_dir / f"{cluster_id}.log").open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            cwd="/",
            start_new_session=True,
        )
    r.pid, r.started = proc.pid, hostops.start_time(proc.pid)
    _write(state_dir, r)
    return r


def stop(state_dir: Path, cluster_id: str, bridge: str) -> None:
    """End the cluster's balancer (by its recorded PID), take its address off the
    bridge and forget it. Safe to repeat."""
    r = read(state_dir, cluster_id)
    with contextlib.suppress(FileNotFoundError):
        record_path(state_dir, cluster_id).unlink()
    if r is None:
        return
    if r.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(r.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while r.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if r.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.pid, signal.SIGKILL)
    if hostops.link_exists(bridge):
        with contextlib.suppress(MachineError):  # gone already
            hostops.ip("addr", "del", f"{r.address}/32", "dev", bridge)


def masters(state_dir: Path, cluster_id: str) -> list[str]:
    """The addresses of the cluster's running masters, oldest machine first."""
    root = state_dir / "machines"
    found: list[tuple[float, str]] = []
    if root.is_dir():
        for d in root.iterdir():
            r = machines.read(d)
            if (
                r is not None
                and r.tags.get(TAG_CLUSTER) == cluster_id
                and r.tags.get(TAG_ROLE) == "master"
                and not r.deleting
                and r.alive()
            ):
                found.append((r.created_at, r.address))
    return [a for _, a in sorted(found)]


class Forwarder:
    """The serving side: pick a backend per connection, pipe bytes both ways."""

    def __init__(self, state_dir: Path, cluster_id: str, backend_port: int, bridge: str) -> None:
        self.state_dir, self.cluster_id = state_dir, cluster_id
        self.backend_port, self.bridge = backend_port, bridge
        self.backends: list[str] = []
        self.read_at = 0.0
        self.failed: dict[str, float] = {}
        self.turn = 0

    def candidates(self) -> list[str]:
        now = time.monotonic()
        if now - self.read_at >= REFRESH:
            self.backends, self.read_at = masters(self.state_dir, self.cluster_id), now
        fresh = [a for a in self.backends if now - self.failed.get(a, -BACKOFF) >= BACKOFF]
        order = fresh or self.backends  # all failed lately: try them all again
        if not order:
            return []
        self.turn = (self.turn + 1) % len(order)
        return order[self.turn :] + order[: self.turn]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None
        for address in self.candidates():
            try:
                upstream = await asyncio.wait_for(
                    asyncio.open_connection(address, self.backend_port), CONNECT_TIMEOUT
                )
                break
            except (OSError, TimeoutError):
                self.failed[address] = time.monotonic()
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                with contextlib.suppress(OSError):
                    w.close()

    def should_stop(self) -> bool:
        return not record_path(self.state_dir, self.cluster_id).exists() or not hostops.link_exists(
            self.bridge
        )


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(OSError):
            if dst.can_write_eof():
                dst.write_eof()
            else:
                dst.close()


async def serve(f: Forwarder, listen: str, port: int) -> None:
    server = await asyncio.start_server(f.handle, listen, port, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        while not stop.is_set() and not f.should_stop():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REFRESH)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shoal.drivers.local.balancer")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--listen", required=True)
    parser.add_argument("--port", type=int, default=API_PORT)
    parser.add_argument("--backend-port", type=int, default=API_PORT)
    parser.add_argument("--bridge", required=True, help="stop once this interface is gone")
    args = parser.parse_args(argv)
    f = Forwarder(Path(args.state_dir), args.cluster, args.backend_port, args.bridge)
    print(f"balancer {args.listen}:{args.port} for cluster {args.cluster}", flush=True)
    asyncio.run(serve(f, args.listen, args.port))
    print("balancer stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
