"""The bootstrap data shoal renders for each node (cloud-init user data).

- `user_data(who, shoal_url, token)`: the node's identity and the node agent only
  (what every node gets today).
- `render(node, cluster, secrets, version, ...)`: the same, plus the node's part of
  a real Kubernetes cluster (`kubernetes.py`): its certificates and configs, and
  the services manifest the node agent supervises.
"""

from __future__ import annotations

from datetime import datetime

from shoal.domain.bootstrap import kubernetes
from shoal.domain.bootstrap.cloudconfig import (
    AGENT_UNIT,
    AGENT_UNIT_PATH,
    IDENTITY_PATH,
    START_AGENT,
    VERSION,
    File,
    NodeIdentity,
    cloud_config,
    identity_file,
    user_data,
    without_agent_token,
)
from shoal.domain.bootstrap.kubernetes import ClusterPlan, ClusterSecrets, KubeNode, Master
from shoal.domain.bootstrap.versions import KubeVersion

__all__ = [
    "AGENT_UNIT",
    "AGENT_UNIT_PATH",
    "IDENTITY_PATH",
    "START_AGENT",
    "VERSION",
    "ClusterPlan",
    "ClusterSecrets",
    "File",
    "KubeNode",
    "KubeVersion",
    "Master",
    "NodeIdentity",
    "cloud_config",
    "identity_file",
    "render",
    "user_data",
    "without_agent_token",
]


def render(
    node: KubeNode,
    cluster: ClusterPlan,
    secrets: ClusterSecrets,
    version: KubeVersion,
    *,
    shoal_url: str,
    agent_token: str | None,
    now: datetime,
) -> str:
    """`node`'s `#cloud-config`: its identity, the node agent, and its Kubernetes (files
    and the services the agent starts). Raises `kubernetes.NotRenderable` when
    something the node needs is not known yet (a multi-master etcd's peer addresses)."""
    bundle = kubernetes.bundle(node, cluster, secrets, version, now)
    who = node.identity
    files = [
        identity_file(who, shoal_url, agent_token),
        File(AGENT_UNIT_PATH, AGENT_UNIT),
        *kubernetes.files(bundle),
    ]
    return cloud_config(who.name, files)
