"""`shoal-agent`: run the node agent.

    shoal-agent [--identity /etc/shoal/node.json] [--state-dir /var/lib/shoal-agent]
                [--config /etc/shoal/agent.json] [--once]

The identity file is written by the node's bootstrap data (its node uuid, shoal's
URL and its token). The config file (optional) may set `interval` (seconds) and
`commands` (task kind -> list of argv templates) for nodes that differ.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from shoal.agent import protocol
from shoal.agent.agent import Agent, Client, Identity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shoal-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--identity", default=protocol.IDENTITY_PATH)
    parser.add_argument("--state-dir", default="/var/lib/shoal-agent")
    parser.add_argument("--config", default="/etc/shoal/agent.json")
    parser.add_argument("--once", action="store_true", help="one heartbeat (and task), then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        identity = Identity.load(Path(args.identity))
    except (OSError, ValueError, KeyError) as exc:
        print(f"shoal-agent: cannot read the identity {args.identity}: {exc}", file=sys.stderr)
        return 2
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
    )
    if args.once:
        agent.tick()
        return 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    agent.run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
