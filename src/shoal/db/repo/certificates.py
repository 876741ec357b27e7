"""Cluster CAs: read, insert once (race-safe), replace on rotation.

The private key is stored sealed (`domain.sealing`: encrypted with the
operator's key, in the same text column); a key stored before sealing existed
is plaintext PEM until `seal_plaintext` seals it, on start or first use.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from shoal.db.engine import dialect_of, upsert
from shoal.db.tables import ClusterCARow, table_of
from shoal.domain import pki, sealing

_TABLE = table_of(ClusterCARow)
_GET = select(_TABLE.c.cert_pem, _TABLE.c.key_pem)
_PLAIN = ~_TABLE.c.key_pem.startswith(sealing.PREFIX, autoescape=True)


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


def get_cert(session: Session, cluster_uuid: str) -> str | None:
    """The cluster's CA certificate (PEM), or None when none was made yet."""
    stmt = select(_TABLE.c.cert_pem).where(_TABLE.c.cluster_uuid == cluster_uuid)
    cert: str | None = session.scalar(stmt)
    return cert


def get(session: Session, cluster_uuid: str, sealer: sealing.Sealer) -> pki.CA | None:
    """The cluster's CA with its key opened, or None when none was made yet.
    SecretUnavailable when the key was sealed with another key than `sealer`'s."""
    row = session.execute(_GET.where(_TABLE.c.cluster_uuid == cluster_uuid)).first()
    if row is None:
        return None
    key = sealer.open(row.key_pem, f"the CA key of cluster {cluster_uuid}")
    return pki.CA(cert_pem=row.cert_pem, key_pem=key)


def seal_plaintext(
    session: Session, sealer: sealing.Sealer, cluster_uuid: str | None = None
) -> int:
    """Seal the keys stored as plaintext (of one cluster, or all); how many were.
    Each row is updated only if it still holds the plaintext that was read."""
    stmt = select(_TABLE.c.cluster_uuid, _TABLE.c.key_pem).where(_PLAIN)
    if cluster_uuid is not None:
        stmt = stmt.where(_TABLE.c.cluster_uuid == cluster_uuid)
    done = 0
    with _keys_unlogged():
        for uuid, plain in session.execute(stmt).all():
            result = session.execute(
                update(_TABLE)
                .where(_TABLE.c.cluster_uuid == uuid, _TABLE.c.key_pem == plain)
                .values(key_pem=sealer.seal(plain))
            )
            done += result.rowcount  # type: ignore[attr-defined]
    return done


def sealed_elsewhere(session: Session, sealer: sealing.Sealer) -> tuple[str, str] | None:
    """(cluster uuid, key id) of a key sealed with another key than `sealer`'s, if any."""
    own = f"{sealing.PREFIX}{sealer.key_id}:"
    stmt = (
        select(_TABLE.c.cluster_uuid, _TABLE.c.key_pem)
        .where(~_PLAIN, ~_TABLE.c.key_pem.startswith(own, autoescape=True))
        .limit(1)
    )
    row = session.execute(stmt).first()
    if row is None:
        return None
    return row.cluster_uuid, sealing.sealed_by(row.key_pem) or "?"


def insert_if_absent(
    session: Session, cluster_uuid: str, ca: pki.CA, now: datetime, sealer: sealing.Sealer
) -> pki.CA:
    """Store `ca` (its key sealed) unless the cluster has one already; the CA that is
    stored.

    Two requests that each made a CA for the same cluster both end with the one
    that was committed first (ON CONFLICT DO NOTHING on the primary key: no
    unique-violation error on PostgreSQL, and no second CA)."""
    stmt = _insert(session).values(
        cluster_uuid=cluster_uuid,
        cert_pem=ca.cert_pem,
        key_pem=sealer.seal(ca.key_pem),
        created_at=now,
    )
    with _keys_unlogged():
        session.execute(stmt.on_conflict_do_nothing(index_elements=[_TABLE.c.cluster_uuid]))
    stored = get(session, cluster_uuid, sealer)
    if stored is None:  # pragma: no cover - the insert or the conflicting row is visible
        raise RuntimeError(f"the CA of cluster {cluster_uuid} vanished while it was stored")
    return stored


def replace(
    session: Session, cluster_uuid: str, ca: pki.CA, now: datetime, sealer: sealing.Sealer
) -> None:
    """Make `ca` the cluster's CA (a rotation; its key sealed), whether it had one or not."""
    ins = _insert(session).values(
        cluster_uuid=cluster_uuid,
        cert_pem=ca.cert_pem,
        key_pem=sealer.seal(ca.key_pem),
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
