"""The services manifest: what the node agent runs and supervises on a node
(`/etc/shoal/services.json`, read by `shoal.agent.services`).

    {"version": 1,
     "node_ip_route_to": "<host>",            # optional: how the agent finds ${node_ip}
     "services": [{"name", "argv", "env", "cwd", "depends_on", "ready", "oneshot"}]}

The agent starts the services in order once every service a service depends on
is ready, restarts one that exits (with a bounded backoff; a `oneshot` one only
until it has succeeded once), stops them on request and reports each one's
state in its heartbeat. `ready` is one probe: `{"tcp": "host:port"}` (connects),
`{"file": path}` (exists) or `{"command": [argv]}` (exits 0); without one, a
service is ready once started. In `argv` and `env` values, `${node_ip}` is the
node's own address as the agent finds it at start (the source address of its
route to `node_ip_route_to`), for what is rendered before the address is known.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PATH = "/etc/shoal/services.json"
FORMAT_VERSION = 1
NODE_IP = "${node_ip}"


@dataclass(frozen=True)
class Service:
    """One supervised service (or one-shot step) of a node."""

    name: str
    argv: tuple[str, ...]
    depends_on: tuple[str, ...] = ()
    ready: Mapping[str, str | list[str]] | None = None
    oneshot: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "argv": list(self.argv)}
        if self.depends_on:
            out["depends_on"] = list(self.depends_on)
        if self.ready is not None:
            out["ready"] = dict(self.ready)
        if self.oneshot:
            out["oneshot"] = True
        if self.env:
            out["env"] = dict(self.env)
        if self.cwd:
            out["cwd"] = self.cwd
        return out


def tcp(host: str, port: int) -> dict[str, str | list[str]]:
    return {"tcp": f"{host}:{port}"}


def file(path: str) -> dict[str, str | list[str]]:
    return {"file": path}


def command(*argv: str) -> dict[str, str | list[str]]:
    return {"command": list(argv)}


def check(services: Sequence[Service]) -> None:
    """ValueError unless names are unique and every dependency is an earlier service
    (so the order given is a start order and there is no cycle)."""
    seen: set[str] = set()
    for s in services:
        if s.name in seen:
            raise ValueError(f"service {s.name} is listed twice")
        missing = [d for d in s.depends_on if d not in seen]
        if missing:
            raise ValueError(f"service {s.name} depends on {missing}, not listed before it")
        if not s.argv:
            raise ValueError(f"service {s.name} has no command")
        seen.add(s.name)


def manifest(services: Sequence[Service], node_ip_route_to: str | None = None) -> str:
    """The manifest's text (JSON), services in start order."""
    check(services)
    doc: dict[str, object] = {
        "version": FORMAT_VERSION,
        "services": [s.to_json() for s in services],
    }
    if node_ip_route_to:
        doc["node_ip_route_to"] = node_ip_route_to
    return json.dumps(doc, indent=1) + "\n"
