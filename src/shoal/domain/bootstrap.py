"""The bootstrap data shoal renders for each node: cloud-init user data.

For now a minimal `#cloud-config` that sets the hostname, writes the node's
identity, shoal's address and the node agent's token to `/etc/shoal/node.json`
(0600: what the node agent and, later, the Kubernetes bootstrap read), and
starts `shoal-agent` when the image carries it (a systemd unit). It is written
as JSON, which YAML (and so cloud-init) reads as it is, and which costs
microseconds per node to render.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

VERSION = "1"  # changes when the rendered data changes in a way nodes must be rebuilt for
IDENTITY_PATH = "/etc/shoal/node.json"


@dataclass(frozen=True)
class NodeIdentity:
    """Who a node is, as it learns it at first boot."""

    node: str  # the node uuid (= the machine id)
    name: str
    cluster: str
    nodegroup: str
    project: str
    role: str


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


def user_data(who: NodeIdentity, shoal_url: str, agent_token: str | None = None) -> str:
    """The node's `#cloud-config` user data."""
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
    config = {
        "hostname": who.name,
        "preserve_hostname": False,
        "write_files": [
            {
                "path": IDENTITY_PATH,
                "permissions": "0600",
                "content": json.dumps(identity, sort_keys=True) + "\n",
            },
            {
                "path": "/etc/systemd/system/shoal-agent.service",
                "permissions": "0644",
                "content": AGENT_UNIT,
            },
        ],
        "runcmd": [["sh", "-c", START_AGENT]],
    }
    return "#cloud-config\n" + json.dumps(config, indent=1, sort_keys=True) + "\n"


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
    return header + json.dumps(config, indent=1, sort_keys=True) + "\n"
