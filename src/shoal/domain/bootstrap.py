"""The bootstrap data shoal renders for each node: cloud-init user data.

For now a minimal `#cloud-config` that sets the hostname and writes the node's
identity and shoal's address to `/etc/shoal/node.json` (what a node agent and,
later, the Kubernetes bootstrap read). It is written as JSON, which YAML (and so
cloud-init) reads as it is, and which costs microseconds per node to render.
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


def user_data(who: NodeIdentity, shoal_url: str) -> str:
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
    config = {
        "hostname": who.name,
        "preserve_hostname": False,
        "write_files": [
            {
                "path": IDENTITY_PATH,
                "permissions": "0644",
                "content": json.dumps(identity, sort_keys=True) + "\n",
            }
        ],
    }
    return "#cloud-config\n" + json.dumps(config, indent=1, sort_keys=True) + "\n"
