"""`shoal-agent`: run the node agent.

    shoal-agent [--identity /etc/shoal/node.json] [--state-dir /var/lib/shoal-agent]
                [--config /etc/shoal/agent.json] [--services /etc/shoal/services.json] [--once]
    shoal-agent etcd-join ... -- etcd ...   (a master's etcd member joins its cluster)

The identity file is written by the node's bootstrap data (its node uuid, shoal's
URL and its token). The config file (optional) may set `interval` (seconds) and
`commands` (task kind -> list of argv templates) for nodes that differ. When the
services manifest exists (a Kubernetes node's bootstrap data writes it), the agent
also starts and supervises the node's services (`shoal.agent.services`), and runs
them even while it has no identity or shoal is away.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from shoal.agent import etcd_join, protocol, services
from shoal.agent.agent import Agent, Client, Identity


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["etcd-join"]:
        return etcd_join.main(argv[1:])
    parser = argparse.ArgumentParser(prog="shoal-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--identity", default=protocol.IDENTITY_PATH)
    parser.add_argument("--state-dir", default="/var/lib/shoal-agent")
    parser.add_argument("--config", default="/etc/shoal/agent.json")
    parser.add_argument("--services", default=services.MANIFEST_PATH)
    parser.add_argument("--once", action="store_true", help="one heartbeat (and task), then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    supervisor = None
    if not args.once and Path(args.services).exists():
        try:
            manifest = services.load(Path(args.services))
        except (OSError, ValueError) as exc:
            print(f"shoal-agent: cannot read the services {args.services}: {exc}", file=sys.stderr)
            return 2
        supervisor = services.Supervisor(manifest, Path(args.state_dir) / "logs")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        identity = Identity.load(Path(args.identity))
    except (OSError, ValueError, KeyError) as exc:
        print(f"shoal-agent: cannot read the identity {args.identity}: {exc}", file=sys.stderr)
        if supervisor is None:
            return 2
        supervisor.run(stop)  # the node's services run without shoal
        return 0
    config = {}
    if Path(args.config).exists():
        try:
            config = json.loads(Path(args.config).read_text())
        except ValueError as exc:
            print(f"shoal-agent: {args.config} is not JSON: {exc}", file=sys.stderr)
            return 2
    agent = Agent(
        Client(identity),
        Path(args.state_dir),
        overrides=config.get("commands") or {},
        interval=float(config.get("interval") or 10.0),
        supervisor=supervisor,
    )
    if args.once:
        agent.tick()
        return 0
    watcher = None
    if supervisor is not None:
        watcher = threading.Thread(target=supervisor.run, args=(stop,), name="services")
        watcher.start()
    agent.run(stop)
    if watcher is not None:
        watcher.join()  # the services stopped (the reverse of their start order)
    return 0


if __name__ == "__main__":
    sys.exit(main())
