"""A cluster's Kubernetes secrets as the conductor renders nodes with them: its CA (the
one `openstack coe ca show` returns; made and stored sealed now if the cluster has none
yet), its service-account key and its bootstrap token (both derived from the
deployment's secret key: `Sealer.service_account_key`, `Sealer.bootstrap_token`)."""

from __future__ import annotations

from collections.abc import Callable

from shoal.db.engine import Database
from shoal.db.repo import certificates
from shoal.db.types import utcnow
from shoal.domain import pki, sealing
from shoal.domain.bootstrap import ClusterSecrets


class KubeSecrets:
    def __init__(self, db: Database, sealer: Callable[[], sealing.Sealer]) -> None:
        self.db = db
        self.sealer = sealer

    def __call__(self, cluster_uuid: str) -> ClusterSecrets:
        sealer = self.sealer()
        with self.db.read() as s:
            ca = certificates.get(s, cluster_uuid, sealer)
        if ca is None:
            with self.db.write() as s:
                now = utcnow()
                ca = certificates.insert_if_absent(
                    s, cluster_uuid, pki.new_ca(cluster_uuid, now), now, sealer
                )
        return ClusterSecrets(
            ca,
            sealer.service_account_key(cluster_uuid),
            sealer.bootstrap_token(cluster_uuid),
        )
