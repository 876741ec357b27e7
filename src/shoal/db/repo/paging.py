"""Magnum-style pagination (limit, marker, sort_key, sort_dir) on any resource table."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Select, and_, or_, select
from sqlalchemy.orm import Session

from shoal.domain.errors import Invalid


@dataclass(frozen=True)
class Page:
    """What the caller asked for; `limit` is already capped by the API."""

    limit: int
    marker: str | None = None
    sort_key: str = "id"
    sort_dir: str = "asc"


def paginate(
    session: Session,
    stmt: Select[Any],
    row_cls: Any,
    page: Page,
    sort_keys: frozenset[str],
    *,
    entities: bool = True,
) -> list[Any]:
    """Rows of `stmt` after the marker (a uuid of a row `stmt` selects), in the asked order.

    `entities=False`: `stmt` selects columns and plain records come back (no ORM
    objects: several times cheaper for big pages), read by column name like the ORM
    objects (`records`)."""
    if page.sort_key not in sort_keys:
        raise Invalid(
            f"sort_key {page.sort_key!r} is not one of {', '.join(sorted(sort_keys))}", "sort_key"
        )
    if page.sort_dir not in ("asc", "desc"):
        raise Invalid(f"sort_dir must be asc or desc (got {page.sort_dir!r})", "sort_dir")
    col = getattr(row_cls, page.sort_key)
    desc = page.sort_dir == "desc"
    if page.marker is not None:
        # The marker is looked up under the list's own filter (project, cluster,
        # role): a uuid from outside the list is refused like an unknown one, and
        # never reveals where another project's object sorts.
        find = select(col, row_cls.id).where(row_cls.uuid == page.marker)
        if stmt.whereclause is not None:
            find = find.where(stmt.whereclause)
        mk = session.execute(find).one_or_none()
        if mk is None:
            raise Invalid(f"marker {page.marker} does not name an object of this list", "marker")
        value, mid = mk
        after = (col < value) if desc else (col > value)
        id_after = (row_cls.id < mid) if desc else (row_cls.id > mid)
        if page.sort_key == "id":
            stmt = stmt.where(id_after)
        elif value is None:
            stmt = stmt.where(or_(col.is_not(None), and_(col.is_(None), id_after)))
        else:
            stmt = stmt.where(or_(after, and_(col == value, id_after)))
    order = [col.desc(), row_cls.id.desc()] if desc else [col.asc(), row_cls.id.asc()]
    stmt = stmt.order_by(*order).limit(page.limit)
    return list(session.scalars(stmt)) if entities else records(session.execute(stmt))


def records(result: Any) -> list[Any]:
    """A Core result's rows as named tuples of its columns: attribute access by
    column name costs a tuple index, not a lookup in SQLAlchemy's row (converting a
    page of 1,000 nodes: about 5 ms of CPU instead of 16)."""
    make = _record_type(tuple(result.keys()))._make
    return [make(row) for row in result]


@cache
def _record_type(columns: tuple[str, ...]) -> Any:
    return namedtuple("Record", columns)
