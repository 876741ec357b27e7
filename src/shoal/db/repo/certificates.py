"""Cluster CAs: read, insert once (race-safe), replace on rotation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from shoal.db.engine import dialect_of, upsert
from shoal.db.tables import ClusterCARow, table_of
from shoal.domain import pki

_TABLE = table_of(ClusterCARow)
_GET = select(_TABLE.c.cert_pem, _TABLE.c.key_pem)


def _insert(session: Session) -> Any:
    return upsert(dialect_of(session), _TABLE)


@contextmanager
def _keys_unlogged() -> Iterator[None]:
    """A failed statement's error names its parameters, and the API logs errors it
    does not map: strip them, so that a CA key cannot reach a log line."""
    try:
        yield
    except StatementError as exc:
        exc.hide_parameters = True
        exc.params = None
        raise


def get(session: Session, cluster_uuid: str) -> pki.CA | None:
    """The cluster's CA, or None when none was made yet."""
    row = session.execute(_GET.where(_TABLE.c.cluster_uuid == cluster_uuid)).first()
    return None if row is None else pki.CA(cert_pem=row.cert_pem, key_pem=row.key_pem)


def insert_if_absent(session: Session, cluster_uuid: str, ca: pki.CA, now: datetime) -> pki.CA:
    """Store `ca` unless the cluster has one already; the CA that is stored.

    Two requests that each made a CA for the same cluster both end with the one
    that was committed first (ON CONFLICT DO NOTHING on the primary key: no
    unique-violation error on PostgreSQL, and no second CA)."""
    stmt = _insert(session).values(
        cluster_uuid=cluster_uuid, cert_pem=ca.cert_pem, key_pem=ca.key_pem, created_at=now
    )
    with _keys_unlogged():
        session.execute(stmt.on_conflict_do_nothing(index_elements=[_TABLE.c.cluster_uuid]))
    stored = get(session, cluster_uuid)
    if stored is None:  # pragma: no cover - the insert or the conflicting row is visible
        raise RuntimeError(f"the CA of cluster {cluster_uuid} vanished while it was stored")
    return stored


def replace(session: Session, cluster_uuid: str, ca: pki.CA, now: datetime) -> None:
    """Make `ca` the cluster's CA (a rotation), whether it had one or not."""
    ins = _insert(session).values(
        cluster_uuid=cluster_uuid,
        cert_pem=ca.cert_pem,
        key_pem=ca.key_pem,
        created_at=now,
        rotated_at=now,
    )
    with _keys_unlogged():
        session.execute(
            ins.on_conflict_do_update(
                index_elements=[_TABLE.c.cluster_uuid],
                set_={
                    "cert_pem": ins.excluded.cert_pem,
                    "key_pem": ins.excluded.key_pem,
                    "rotated_at": ins.excluded.rotated_at,
                },
            )
        )
