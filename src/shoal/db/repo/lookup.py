"""Find one row by uuid or name within a project (Magnum: names may repeat)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from shoal.domain import validation
from shoal.domain.errors import AmbiguousName, NotFound

UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)


def is_uuid(ident: str) -> bool:
    return bool(UUID_RE.match(ident))


def find(
    session: Session,
    row_cls: Any,
    ident: str,
    *,
    kind: str,
    plural: str,
    where: tuple[ColumnElement[bool], ...] = (),
    by_int_id: bool = False,
    for_update: bool = False,
) -> Any:
    """The row named `ident` (uuid, then name, then integer id if allowed) or NotFound."""
    base = select(row_cls).where(*where)
    if for_update:
        base = base.with_for_update()
    if is_uuid(ident):
        row = session.scalars(base.where(row_cls.uuid == ident.lower())).first()
        if row is not None:
            return row
    rows = list(session.scalars(base.where(row_cls.name == ident).limit(2)))
    if len(rows) > 1:
        raise AmbiguousName(plural)
    if rows:
        return rows[0]
    row_id = validation.decimal_id(ident) if by_int_id else None
    if row_id is not None:
        row = session.scalars(base.where(row_cls.id == row_id)).first()
        if row is not None:
            return row
    raise NotFound(kind, ident)
