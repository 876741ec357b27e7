"""Clusters' delegated credentials (a Keystone trust), sealed at rest: written with
the cluster, read by conductors, deleted with the cluster."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from shoal.db.engine import Database
from shoal.db.tables import ClusterCredentialRow


def insert(s: Session, cluster_uuid: str, kind: str, sealed: str, now: datetime) -> None:
    s.add(ClusterCredentialRow(cluster_uuid=cluster_uuid, kind=kind, sealed=sealed, created_at=now))
    s.flush()


def sealed_of(db: Database, cluster_uuid: str) -> tuple[str, str] | None:
    """(kind, sealed value) of the cluster's credential, or None."""
    with db.read() as s:
        row = s.execute(
            select(ClusterCredentialRow.kind, ClusterCredentialRow.sealed).where(
                ClusterCredentialRow.cluster_uuid == cluster_uuid
            )
        ).first()
    return (str(row[0]), str(row[1])) if row is not None else None
