"""Cluster templates and node group templates (embedded or standalone)."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from shoal.db import convert
from shoal.db.records import TemplateRef
from shoal.db.repo import lookup
from shoal.db.repo.paging import Page, paginate
from shoal.db.tables import ClusterTemplateRow, NodeGroupTemplateRow, table_of
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain.entries import TemplateEntryPlan
from shoal.domain.policy import Scope

_CT_TABLE = table_of(ClusterTemplateRow)
_NGT_TABLE = table_of(NodeGroupTemplateRow)
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


def _find_ct(session: Session, scope: Scope, ident: str) -> ClusterTemplateRow:
    row: ClusterTemplateRow = lookup.find(
        session,
        ClusterTemplateRow,
        ident,
        kind="ClusterTemplate",
        plural="clustertemplates",
        scope=scope,
        shared=ClusterTemplateRow.public.is_(True),
    )
    return row


def find_ct(session: Session, scope: Scope, ident: str) -> TemplateRef:
    """A template of the scope (or a public one) by uuid or name."""
    return convert.template_ref_from_row(_find_ct(session, scope, ident))


def get_ct(session: Session, scope: Scope, ident: str) -> m.ClusterTemplate:
    return _ct(session, _find_ct(session, scope, ident))


def list_cts(session: Session, scope: Scope, page: Page) -> list[m.ClusterTemplate]:
    stmt = select(ClusterTemplateRow).where(
        *lookup.in_scope(ClusterTemplateRow.project_id, scope, ClusterTemplateRow.public.is_(True))
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
    ngts: Sequence[TemplateEntryPlan] = (),
    source_id: str | None = None,
) -> m.ClusterTemplate:
    """A template with its entries (embedded NGTs and references), in order."""
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
    replace_embedded(session, row.uuid, row.project_id, ngts)
    return _ct(session, row)


def replace_embedded(
    session: Session,
    ct_uuid: str,
    project_id: str,
    ngts: Sequence[TemplateEntryPlan],
) -> None:
    """Drop the template's entries and write `ngts` in their place: an embedded NGT
    keeps its whole spec, a reference only the attributes over the NGT it names."""
    session.execute(
        delete(NodeGroupTemplateRow).where(NodeGroupTemplateRow.cluster_template_uuid == ct_uuid)
    )
    for pos, x in enumerate(ngts):
        session.add(
            NodeGroupTemplateRow(
                uuid=new_uuid(),
                project_id=project_id,
                name=x.name,
                cluster_template_uuid=ct_uuid,
                position=pos,
                spec=dict(x.overrides) if x.reference else convert.ngt_spec_to_json(x.spec),
                source_id=x.source_id,
                reference_uuid=x.reference,
                created_at=utcnow(),
            )
        )
    session.flush()


def update_ct(session: Session, uuid: str, name: str, attrs: dict[str, Any]) -> m.ClusterTemplate:
    """The template's new name and attributes (one UPDATE, which returns it)."""
    row = session.execute(
        update(_CT_TABLE)
        .where(_CT_TABLE.c.uuid == uuid)
        .values(name=name, attrs=attrs, public=bool(attrs.get("public")), updated_at=utcnow())
        .returning(*_CT_TABLE.c)
    ).one()
    return convert.ct_from_row(row, _embedded(session, [uuid])[uuid])


def delete_ct(session: Session, uuid: str) -> None:
    session.execute(
        delete(NodeGroupTemplateRow).where(NodeGroupTemplateRow.cluster_template_uuid == uuid)
    )
    session.execute(delete(ClusterTemplateRow).where(ClusterTemplateRow.uuid == uuid))


# Embedded node group templates belong to their cluster template: they are read and
# changed through it, and stay out of the standalone collection and its name space.
_STANDALONE = NodeGroupTemplateRow.cluster_template_uuid.is_(None)


def get_ngt(
    session: Session, scope: Scope, ident: str, for_update: bool = False
) -> m.NodeGroupTemplate:
    """A standalone node group template of the project, by uuid or name (`for_update`:
    locked, so that a template cannot reference it while it is being deleted)."""
    row: NodeGroupTemplateRow = lookup.find(
        session,
        NodeGroupTemplateRow,
        ident,
        kind="NodeGroupTemplate",
        plural="nodegrouptemplates",
        scope=scope,
        where=(_STANDALONE,),
        for_update=for_update,
    )
    return convert.ngt_from_row(row)


def referenced_ngts(session: Session, ct: m.ClusterTemplate) -> dict[str, m.NodeGroupTemplate]:
    """The standalone NGTs a template's entries reference, by uuid. By uuid alone: a
    public template's references are its owner's NGTs, checked when it was written."""
    uuids = [
        x.nodegroup_template_id
        for x in ct.node_group_templates
        if isinstance(x, m.NodeGroupTemplateRef)
    ]
    if not uuids:
        return {}
    rows = session.scalars(
        select(NodeGroupTemplateRow).where(NodeGroupTemplateRow.uuid.in_(uuids), _STANDALONE)
    )
    return {r.uuid: convert.ngt_from_row(r) for r in rows}


def referencing_cts(session: Session, ngt_uuid: str) -> list[str]:
    """Names of the cluster templates with an entry that references the NGT."""
    names = session.scalars(
        select(ClusterTemplateRow.name)
        .join(
            NodeGroupTemplateRow,
            NodeGroupTemplateRow.cluster_template_uuid == ClusterTemplateRow.uuid,
        )
        .where(NodeGroupTemplateRow.reference_uuid == ngt_uuid)
        .order_by(ClusterTemplateRow.name)
        .distinct()
    )
    return list(names)


def list_ngts(session: Session, scope: Scope, page: Page) -> list[m.NodeGroupTemplate]:
    stmt = select(NodeGroupTemplateRow).where(
        *lookup.in_scope(NodeGroupTemplateRow.project_id, scope), _STANDALONE
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
    session: Session, uuid: str, name: str, spec: m.NodeGroupSpec
) -> m.NodeGroupTemplate:
    """The NGT's new name and spec (one UPDATE, which returns it)."""
    row = session.execute(
        update(_NGT_TABLE)
        .where(_NGT_TABLE.c.uuid == uuid)
        .values(name=name, spec=convert.ngt_spec_to_json(spec), updated_at=utcnow())
        .returning(*_NGT_TABLE.c)
    ).one()
    return convert.ngt_from_row(row)


def delete_ngt(session: Session, uuid: str) -> None:
    session.execute(delete(NodeGroupTemplateRow).where(NodeGroupTemplateRow.uuid == uuid))
