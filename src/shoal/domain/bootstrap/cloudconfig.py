"""The cloud-init user data shoal renders for each node: a `#cloud-config` that sets
the hostname, writes the node's identity, shoal's address and the node agent's
token to `/etc/shoal/node.json` (0600: what the node agent reads), writes any
further files (the Kubernetes configuration, `kubernetes.py`) and starts
`shoal-agent` when the image carries it (a systemd unit, or in the background
where there is no systemd). It is written as JSON, which YAML (and so cloud-init)
reads as it is, and which costs microseconds per node to render.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

VERSION = "2"  # changes when the rendered data changes in a way nodes must be rebuilt for
IDENTITY_PATH = "/etc/shoal/node.json"
AGENT_UNIT_PATH = "/etc/systemd/system/shoal-agent.service"


@dataclass(frozen=True)
class NodeIdentity:
    """Who a node is, as it learns it at first boot."""

    node: str  # the node uuid (= the machine id)
    name: str
    cluster: str
    nodegroup: str
    project: str
    role: str


@dataclass(frozen=True)
class File:
    """One file cloud-init writes (parent directories are made as needed)."""

    path: str
    content: str
    permissions: str = "0644"


AGENT_UNIT = """[Unit]
Description=shoal node agent
After=network-online.target

[Service]
ExecStart=/usr/bin/env shoal-agent
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
"""
# Start the agent if the image carries it (no image: nothing to start, no error).
START_AGENT = (
    "command -v shoal-agent >/dev/null 2>&1 && "
    "(systemctl enable --now shoal-agent.service || (shoal-agent &)) || true"
)


def identity_file(who: NodeIdentity, shoal_url: str, agent_token: str | None) -> File:
    """`/etc/shoal/node.json`: the node's identity, shoal's URL and its agent's token."""
    identity = {
        "node": who.node,
        "name": who.name,
        "cluster": who.cluster,
        "nodegroup": who.nodegroup,
        "project": who.project,
        "role": who.role,
        "shoal_url": shoal_url,
        "bootstrap_version": VERSION,
    }
    if agent_token:
        identity["agent_token"] = agent_token
    return File(IDENTITY_PATH, json.dumps(identity, sort_keys=True) + "\n", "0600")


def cloud_config(hostname: str, files: Sequence[File]) -> str:
    """A `#cloud-config` that sets `hostname`, writes `files` (in order) and starts the
    node agent. Paths must be unique: a second write of one path is a renderer bug."""
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise ValueError(f"files written twice: {sorted({p for p in paths if paths.count(p) > 1})}")
    config: dict[str, Any] = {
        "hostname": hostname,
        "preserve_hostname": False,
        "write_files": [
            {"path": f.path, "permissions": f.permissions, "content": f.content} for f in files
        ],
        "runcmd": [["sh", "-c", START_AGENT]],
    }
    # On one line: Python's JSON encoder runs in C only without indentation (rendered
    # for every node a pass creates; cloud-init reads it as YAML all the same).
    return "#cloud-config\n" + json.dumps(config, sort_keys=True) + "\n"


def user_data(who: NodeIdentity, shoal_url: str, agent_token: str | None = None) -> str:
    """The node's `#cloud-config` user data: its identity and the agent, nothing else."""
    return cloud_config(
        who.name,
        [identity_file(who, shoal_url, agent_token), File(AGENT_UNIT_PATH, AGENT_UNIT)],
    )


def without_agent_token(text: str) -> str:
    """`text` (user data) with the node agent's token taken out of the identity file, for
    where it must not be written: a kernel command line or a domain's metadata, which
    anyone who may read the host's process list or domain XML sees. User data shoal
    did not render this way comes back unchanged."""
    header = "#cloud-config\n"
    if not text.startswith(header) or "agent_token" not in text:
        return text
    try:
        config = json.loads(text[len(header) :])
        files = config["write_files"]
        for f in files:
            if f.get("path") == IDENTITY_PATH:
                identity = json.loads(f["content"])
                identity.pop("agent_token", None)
                f["content"] = json.dumps(identity, sort_keys=True) + "\n"
    except (ValueError, KeyError, TypeError, AttributeError):
        return text
    return header + json.dumps(config, sort_keys=True) + "\n"
