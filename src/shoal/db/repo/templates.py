"""Cluster templates and node group templates (embedded or standalone)."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from shoal.db import convert
from shoal.db.repo import lookup
from shoal.db.repo.paging import Page, paginate
from shoal.db.tables import ClusterTemplateRow, NodeGroupTemplateRow
from shoal.db.types import utcnow
from shoal.domain import model as m

CT_SORT_KEYS = frozenset({"id", "uuid", "name", "created_at", "updated_at"})
NGT_SORT_KEYS = CT_SORT_KEYS


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def _embedded(session: Session, ct_uuids: Sequence[str]) -> dict[str, list[NodeGroupTemplateRow]]:
    out: dict[str, list[NodeGroupTemplateRow]] = {u: [] for u in ct_uuids}
    if not ct_uuids:
        return out
    rows = session.scalars(
        select(NodeGroupTemplateRow)
        .where(NodeGroupTemplateRow.cluster_template_uuid.in_(ct_uuids))
        .order_by(NodeGroupTemplateRow.position, NodeGroupTemplateRow.id)
    )
    for r in rows:
        out[r.cluster_template_uuid or ""].append(r)
    return out


def _ct(session: Session, row: ClusterTemplateRow) -> m.ClusterTemplate:
    return convert.ct_from_row(row, _embedded(session, [row.uuid])[row.uuid])


def find_ct_row(session: Session, project_id: str, ident: str) -> ClusterTemplateRow:
    """A template of the project (or a public one) by uuid or name."""
    row: ClusterTemplateRow = lookup.find(
        session,
        ClusterTemplateRow,
        ident,
        kind="ClusterTemplate",
        plural="clustertemplates",
        where=((ClusterTemplateRow.project_id == project_id) | ClusterTemplateRow.public,),
    )
    return row


def get_ct(session: Session, project_id: str, ident: str) -> m.ClusterTemplate:
    return _ct(session, find_ct_row(session, project_id, ident))


def list_cts(session: Session, project_id: str, page: Page) -> list[m.ClusterTemplate]:
    stmt = select(ClusterTemplateRow).where(
        (ClusterTemplateRow.project_id == project_id) | ClusterTemplateRow.public
    )
    rows = paginate(session, stmt, ClusterTemplateRow, page, CT_SORT_KEYS)
    emb = _embedded(session, [r.uuid for r in rows])
    return [convert.ct_from_row(r, emb[r.uuid]) for r in rows]


def insert_ct(
    session: Session,
    *,
    project_id: str,
    user_id: str,
    name: str,
    attrs: dict[str, Any],
    ngts: Sequence[tuple[str, m.NodeGroupSpec, str | None]] = (),
    source_id: str | None = None,
) -> m.ClusterTemplate:
    """A template with its embedded NGTs (name, spec, source id), in order."""
    row = ClusterTemplateRow(
        uuid=new_uuid(),
        project_id=project_id,
        user_id=user_id,
        name=name,
        public=bool(attrs.get("public")),
        attrs=attrs,
        source_id=source_id,
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    replace_embedded(session, row, ngts)
    return _ct(session, row)


def replace_embedded(
    session: Session,
    row: ClusterTemplateRow,
    ngts: Sequence[tuple[str, m.NodeGroupSpec, str | None]],
) -> None:
    """Drop the template's embedded NGTs and write `ngts` in their place."""
    session.execute(
        delete(NodeGroupTemplateRow).where(NodeGroupTemplateRow.cluster_template_uuid == row.uuid)
    )
    for pos, (name, spec, source) in enumerate(ngts):
        session.add(
            NodeGroupTemplateRow(
                uuid=new_uuid(),
                project_id=row.project_id,
                name=name,
                cluster_template_uuid=row.uuid,
                position=pos,
                spec=convert.ngt_spec_to_json(spec),
                source_id=source,
                created_at=utcnow(),
            )
        )
    session.flush()


def update_ct(
    session: Session, row: ClusterTemplateRow, name: str, attrs: dict[str, Any]
) -> m.ClusterTemplate:
    row.name = name
    row.attrs = attrs
    row.public = bool(attrs.get("public"))
    row.updated_at = utcnow()
    session.flush()
    return _ct(session, row)


def delete_ct(session: Session, row: ClusterTemplateRow) -> None:
    session.execute(
        delete(NodeGroupTemplateRow).where(NodeGroupTemplateRow.cluster_template_uuid == row.uuid)
    )
    session.delete(row)
    session.flush()


# Embedded node group templates belong to their cluster template: they are read and
# changed through it, and stay out of the standalone collection and its name space.
_STANDALONE = NodeGroupTemplateRow.cluster_template_uuid.is_(None)


def find_ngt_row(session: Session, project_id: str, ident: str) -> NodeGroupTemplateRow:
    """A standalone node group template of the project, by uuid or name."""
    row: NodeGroupTemplateRow = lookup.find(
        session,
        NodeGroupTemplateRow,
        ident,
        kind="NodeGroupTemplate",
        plural="nodegrouptemplates",
        where=(NodeGroupTemplateRow.project_id == project_id, _STANDALONE),
    )
    return row


def get_ngt(session: Session, project_id: str, ident: str) -> m.NodeGroupTemplate:
    return convert.ngt_from_row(find_ngt_row(session, project_id, ident))


def list_ngts(session: Session, project_id: str, page: Page) -> list[m.NodeGroupTemplate]:
    stmt = select(NodeGroupTemplateRow).where(
        NodeGroupTemplateRow.project_id == project_id, _STANDALONE
    )
    rows = paginate(session, stmt, NodeGroupTemplateRow, page, NGT_SORT_KEYS)
    return [convert.ngt_from_row(r) for r in rows]


def insert_ngt(
    session: Session,
    *,
    project_id: str,
    name: str,
    spec: m.NodeGroupSpec,
    source_id: str | None = None,
) -> m.NodeGroupTemplate:
    row = NodeGroupTemplateRow(
        uuid=new_uuid(),
        project_id=project_id,
        name=name,
        spec=convert.ngt_spec_to_json(spec),
        source_id=source_id,
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return convert.ngt_from_row(row)


def update_ngt(
    session: Session, row: NodeGroupTemplateRow, name: str, spec: m.NodeGroupSpec
) -> m.NodeGroupTemplate:
    row.name = name
    row.spec = convert.ngt_spec_to_json(spec)
    row.updated_at = utcnow()
    session.flush()
    return convert.ngt_from_row(row)
