"""A small client of a cluster's Kubernetes API server: the few calls the conductor
makes (list Nodes, patch and delete a Node, list a node's pods, evict a pod), over
httpx, with bounded timeouts and its errors mapped to `KubeError` at this edge."""

from shoal.kube.client import Client, KubeError, Unreachable

__all__ = ["Client", "KubeError", "Unreachable"]
