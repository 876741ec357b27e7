"""API tokens shoal issued (auth mode `local`): kept by digest, listed, revoked."""

from __future__ import annotations

import uuid as uuidlib
from datetime import datetime

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from shoal.db.engine import xact_lock
from shoal.db.tables import ApiTokenRow
from shoal.domain import tokens
from shoal.domain.errors import NotFound

# Built once: every authenticated request that misses the cache looks one up.
_BY_DIGEST = select(ApiTokenRow).where(ApiTokenRow.digest == bindparam("digest"))


def _info(row: ApiTokenRow) -> tokens.TokenInfo:
    return tokens.TokenInfo(
        uuid=row.uuid,
        hint=row.hint,
        project_id=row.project_id,
        user_id=row.user_id,
        role=row.role,
        description=row.description,
        created_by=row.created_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


def insert(
    session: Session,
    token: str,
    *,
    project_id: str,
    user_id: str,
    role: str,
    now: datetime,
    expires_at: datetime | None = None,
    description: str | None = None,
    created_by: str | None = None,
) -> tokens.TokenInfo:
    row = ApiTokenRow(
        uuid=str(uuidlib.uuid4()),
        digest=tokens.digest(token),
        hint=tokens.hint(token),
        project_id=project_id,
        user_id=user_id,
        role=role,
        description=description,
        created_by=created_by,
        created_at=now,
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return _info(row)


def by_digest(session: Session, digest: str) -> tokens.TokenInfo | None:
    """The record of the token with this digest (usable or not), or None for a token
    shoal never issued."""
    row = session.scalars(_BY_DIGEST, {"digest": digest}).first()
    return _info(row) if row is not None else None


def lock(session: Session) -> None:
    """Serialize first-start checks until the transaction ends (PostgreSQL: several
    processes may start at once; SQLite's write transactions already run one at a time)."""
    xact_lock(session, "api_tokens")


def count(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(ApiTokenRow)) or 0)


def listed(session: Session, project_id: str | None) -> list[tokens.TokenInfo]:
    """Every token of a project (or of every project), oldest first."""
    stmt = select(ApiTokenRow).order_by(ApiTokenRow.id)
    if project_id is not None:
        stmt = stmt.where(ApiTokenRow.project_id == project_id)
    return [_info(r) for r in session.scalars(stmt)]


def revoke(session: Session, ident: str, now: datetime) -> tokens.TokenInfo:
    """Revoke the token with uuid `ident`; revoking twice keeps the first time."""
    row = session.scalars(select(ApiTokenRow).where(ApiTokenRow.uuid == ident.lower())).first()
    if row is None:
        raise NotFound("Token", ident)
    if row.revoked_at is None:
        row.revoked_at = now
        session.flush()
    return _info(row)
