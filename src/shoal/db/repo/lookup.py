"""Find one row by uuid or name within the caller's scope (Magnum: names may repeat)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from shoal.domain import validation
from shoal.domain.errors import AmbiguousName, NotFound
from shoal.domain.policy import Scope

UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)


def is_uuid(ident: str) -> bool:
    return bool(UUID_RE.match(ident))


def in_scope(
    project: Any, scope: Scope, shared: ColumnElement[bool] | None = None
) -> tuple[ColumnElement[bool], ...]:
    """The condition that keeps rows of `scope`'s project (column `project`), or rows
    `shared` with every project (public templates); none for every project."""
    if scope.all_projects:
        return ()
    own: ColumnElement[bool] = project == scope.project_id
    return (own | shared,) if shared is not None else (own,)


def find(
    session: Session,
    row_cls: Any,
    ident: str,
    *,
    kind: str,
    plural: str,
    scope: Scope | None = None,
    shared: ColumnElement[bool] | None = None,
    where: tuple[ColumnElement[bool], ...] = (),
    by_int_id: bool = False,
    for_update: bool = False,
) -> Any:
    """The row named `ident` (uuid, then name, then integer id if allowed) among the
    rows `where` keeps and, with a `scope`, of its project (or `shared`); an admin's
    scope also reaches another project's row by its uuid. NotFound otherwise, whether
    the row does not exist or belongs to a project the caller cannot see."""
    scoped = where + (in_scope(row_cls.project_id, scope, shared) if scope else ())
    try:
        return _find(session, row_cls, ident, scoped, kind, by_int_id, for_update, plural)
    except NotFound:
        if scope is None or not scope.admin or scope.all_projects or not is_uuid(ident):
            raise
    row = _by_uuid(session, row_cls, ident, where, for_update)
    if row is None:
        raise NotFound(kind, ident)
    return row


def _by_uuid(
    session: Session,
    row_cls: Any,
    ident: str,
    where: tuple[ColumnElement[bool], ...],
    for_update: bool,
) -> Any:
    stmt = select(row_cls).where(*where, row_cls.uuid == ident.lower())
    return session.scalars(stmt.with_for_update() if for_update else stmt).first()


def _find(
    session: Session,
    row_cls: Any,
    ident: str,
    where: tuple[ColumnElement[bool], ...],
    kind: str,
    by_int_id: bool,
    for_update: bool,
    plural: str,
) -> Any:
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
