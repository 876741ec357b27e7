"""What a node group entry names, looked up and copied: a standalone node group
template or an existing node group of the caller's project. The one way cluster
create (`node_groups` entries), node group create and cluster templates
(references to standalone NGTs) resolve an entry."""

from __future__ import annotations

from collections.abc import Sequence

from shoal.db.records import Session
from shoal.db.repo import nodegroups, templates
from shoal.domain import entries
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Invalid, NotFound
from shoal.domain.merge import GroupPlan
from shoal.domain.policy import Scope


def resolve(
    s: Session, scope: Scope, entry: entries.Entry, cluster_uuid: str | None = None
) -> entries.Source | None:
    """The source an entry names, copied (None: it names none). A node group is
    looked for in `cluster_uuid` first (by uuid, name or id), then in the scope."""
    if entry.ref is None:
        return None
    if entry.ref_key == entries.NGT_REF:
        ngt = templates.get_ngt(s, scope, entry.ref)
        return entries.source_of(ngt.spec, ngt.name, ngt.uuid)
    group = None
    if cluster_uuid is not None:
        try:
            group = nodegroups.find(s, cluster_uuid, entry.ref)
        except NotFound:
            group = None
    if group is None:
        group = nodegroups.find_any(s, scope, entry.ref)
    return entries.source_of(group.spec, group.name, group.uuid)


def resolve_all(
    s: Session, scope: Scope, items: Sequence[entries.Entry]
) -> list[tuple[entries.Entry, entries.Source | None]]:
    return [(e, resolve(s, scope, e)) for e in items]


def template_groups(s: Session, ct: m.ClusterTemplate) -> list[GroupPlan]:
    """A template's entries as a new cluster's groups (references copied as they are now)."""
    return entries.template_groups(ct.node_group_templates, templates.referenced_ngts(s, ct))


def template_entries(
    s: Session, project_id: str, items: Sequence[entries.Entry], limits: v.Limits
) -> list[entries.TemplateEntryPlan]:
    """A cluster template's entries to write, checked: embedded ones, and references
    to standalone NGTs of the project (their attributes checked over the NGT; never
    another project's, even for an admin: the template would depend on it)."""
    out = []
    for e in items:
        referenced = _referenced(s, project_id, e) if e.ref is not None else None
        out.append(entries.template_entry(e, referenced, limits))
    entries.check_template_entries(out, limits)
    return out


def _referenced(s: Session, project_id: str, entry: entries.Entry) -> entries.Source:
    """The standalone NGT a template entry references, locked until the template is
    written (its delete waits, then sees the reference). Not found: Invalid, since the
    template's body is what is wrong."""
    try:
        ngt = templates.get_ngt(s, Scope(project_id), entry.ref or "", for_update=True)
    except NotFound as exc:
        raise Invalid(f"node_group_templates: {exc.message}", "node_group_templates") from exc
    return entries.source_of(ngt.spec, ngt.name, ngt.uuid)
