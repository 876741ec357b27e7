"""The conductor's clients of its clusters' Kubernetes API servers: one per cluster,
authenticated by a client certificate the conductor issues itself from the
cluster's own CA (the one `openstack coe ca show` returns): CN `shoal-conductor`,
O `system:masters`, renewed daily, never written to disk."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta

import httpx

from shoal.domain.bootstrap import ClusterSecrets, certs
from shoal.kube import Client

USER = "shoal-conductor"
GROUPS = ("system:masters",)
RENEW_AFTER = timedelta(days=1)
CLIENTS_MAX = 512  # clusters whose client is kept open


class KubeAccess:
    """Clients by cluster, made on first use and kept (bounded)."""

    def __init__(
        self,
        secrets: Callable[[str], ClusterSecrets],
        now: Callable[[], datetime],
        timeout: float,
        transport: Callable[[str], httpx.BaseTransport] | None = None,
    ) -> None:
        self.secrets = secrets
        self.now = now
        self.timeout = timeout
        # A test's stand-in for the network, by server (a fake API server).
        self.transport = transport
        self._clients: OrderedDict[str, tuple[str, datetime, Client]] = OrderedDict()
        self._lock = threading.Lock()

    def client(self, cluster_uuid: str, server: str) -> Client:
        """The client of cluster `cluster_uuid`'s API server at `server`."""
        now = self.now()
        with self._lock:
            held = self._clients.get(cluster_uuid)
            if held is not None and held[0] == server and now - held[1] < RENEW_AFTER:
                self._clients.move_to_end(cluster_uuid)
                return held[2]
        ca = self.secrets(cluster_uuid).ca
        pair = certs.issue(ca, USER, now, organizations=GROUPS)
        transport = self.transport(server) if self.transport is not None else None
        client = Client(
            server, ca.cert_pem, pair.cert_pem, pair.key_pem, timeout=self.timeout,
            transport=transport,
        )  # fmt: skip
        with self._lock:
            old = self._clients.pop(cluster_uuid, None)
            self._clients[cluster_uuid] = (server, now, client)
            while len(self._clients) > CLIENTS_MAX:
                _, (_, _, gone) = self._clients.popitem(last=False)
                gone.close()
        if old is not None:
            old[2].close()
        return client

    def forget(self, cluster_uuid: str) -> None:
        """Close a cluster's client (the cluster is gone)."""
        with self._lock:
            held = self._clients.pop(cluster_uuid, None)
        if held is not None:
            held[2].close()
