"""Cluster template use cases: create (from attributes, a cluster or another template),
update, delete."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from shoal.db.engine import Database
from shoal.db.records import Session, TemplateRef
from shoal.db.repo import clusters, nodegroups, templates
from shoal.db.repo.paging import Page
from shoal.domain import derived, entries, jsonpatch, merge, policy, specs
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.bootstrap import versions
from shoal.domain.errors import Invalid, NotFound
from shoal.services import sources, vm_templates
from shoal.services.context import Caller

CREATE_KEYS = frozenset(specs.TEMPLATE_ATTRS) | {
    "name",
    "node_group_templates",
    "from_cluster",
    "from_clustertemplate",
    "project_id",
    "user_id",
}
PATCHABLE = frozenset(specs.TEMPLATE_ATTRS) | {"name", "node_group_templates"}
# What a template made from another does not copy: publishing is a decision of its own.
NOT_COPIED = frozenset({"public", "hidden"})
ENTRY_REFS = (entries.NGT_REF,)


def _parse_entries(raw: Any) -> list[entries.Entry]:
    return entries.parse_list(raw, "node_group_templates", ENTRY_REFS, non_empty=False)


def _require(attrs: dict[str, Any], ngts: Sequence[entries.TemplateEntryPlan]) -> None:
    if not attrs.get("coe"):
        raise Invalid("coe is required (kubernetes)", "coe")
    if not attrs.get("image_id") and not (ngts and all(x.spec.image_id for x in ngts)):
        raise Invalid("image_id is required", "image_id")
    versions.check_attrs(attrs)  # a Kubernetes version shoal can install, or a clear 400


def create(db: Database, caller: Caller, body: dict[str, Any]) -> m.ClusterTemplate:
    """From attributes; from a cluster (its node groups become embedded NGTs); from
    another template (its attributes and entries copied); either plus overrides.
    `node_group_templates` entries embed NGTs or reference standalone ones."""
    policy.enforce(caller, "clustertemplate:create")
    v.reject_unknown("clustertemplate", body, CREATE_KEYS)
    if body.get("from_cluster") is not None and body.get("from_clustertemplate") is not None:
        raise Invalid("give from_cluster or from_clustertemplate, not both", "from_clustertemplate")
    name = v.name("name", body["name"]) if body.get("name") is not None else _gen_name()
    attrs = specs.check_attrs("clustertemplate", body, specs.TEMPLATE_ATTRS)
    _check_publish(caller, attrs)
    given = _parse_entries(body.get("node_group_templates"))
    vm_templates.enforce(caller, (e.attrs for e in given))
    with db.write() as s:
        ngts = sources.template_entries(s, caller.project_id, given, caller.limits)
        source_id = None
        base: dict[str, Any] = {}
        if body.get("from_cluster") is not None:
            ident = v.string("from_cluster", body["from_cluster"]) or ""
            src = clusters.find(s, caller.scope, ident)
            source_id = src.uuid
            base = merge.cluster_to_template_attrs(src.attrs)
            if "node_group_templates" not in body:
                ngts = [
                    entries.TemplateEntryPlan(g.name, g.spec, g.uuid)
                    for g in nodegroups.of_cluster(s, src.uuid)
                    if not g.deleting
                ]
        elif body.get("from_clustertemplate") is not None:
            ident = v.string("from_clustertemplate", body["from_clustertemplate"]) or ""
            ct = templates.get_ct(s, caller.scope, ident)
            source_id = ct.uuid
            base = {k: x for k, x in ct.attrs.items() if k not in NOT_COPIED}
            if "node_group_templates" not in body:
                # References stay references within the project; those of another
                # project's public template become embedded copies of its NGTs.
                ngts = entries.as_written(
                    ct.node_group_templates,
                    templates.referenced_ngts(s, ct),
                    copy=True,
                    keep_references=ct.project_id == caller.project_id,
                )
        merged = {"coe": "kubernetes", **base, **attrs} if base else {**attrs}
        merged = _with_distro({k: x for k, x in merged.items() if x is not None})
        _require(merged, ngts)
        return templates.insert_ct(
            s,
            project_id=caller.project_id,
            user_id=caller.user_id,
            name=name,
            attrs=merged,
            ngts=ngts,
            source_id=source_id,
        )


def _with_distro(attrs: dict[str, Any]) -> dict[str, Any]:
    """`attrs` with `cluster_distro` filled from the image name when none is given."""
    distro = derived.cluster_distro(attrs)
    return {**attrs, "cluster_distro": distro} if distro else attrs


def _check_publish(caller: Caller, attrs: dict[str, Any]) -> None:
    """Making a template public (every project sees it) or hidden is an admin's."""
    if attrs.get("public") or attrs.get("hidden"):
        policy.enforce(caller, "clustertemplate:publish")


def _gen_name() -> str:
    return f"template-{secrets.token_hex(4)}"


def get(db: Database, caller: Caller, ident: str) -> m.ClusterTemplate:
    """A template; for the id of one deleted since, the read-only copy a cluster the
    caller can see keeps of it (clients fetch a cluster's `cluster_template_id`)."""
    policy.enforce(caller, "clustertemplate:get")
    with db.read() as s:
        try:
            return templates.get_ct(s, caller.scope, ident)
        except NotFound:
            kept = kept_copy(s, caller, ident)
            if kept is None:
                raise
            return kept


def kept_copy(s: Session, caller: Caller, ident: str) -> m.ClusterTemplate | None:
    """Template `ident` as the newest cluster made from it keeps it: the cluster's
    attributes in template form, named as the template was, marked `kept_by_cluster`."""
    c = clusters.made_from_template(s, caller.scope, ident)
    if c is None:
        return None
    attrs = merge.cluster_to_template_attrs(c.attrs)
    attrs["kept_by_cluster"] = c.uuid
    return m.ClusterTemplate(
        id=0,
        uuid=ident,
        project_id=c.project_id,
        user_id=c.user_id,
        name=str(c.attrs.get(merge.SOURCE_TEMPLATE_NAME) or f"{c.name}-template"),
        attrs=attrs,
        source_id=c.uuid,
        created_at=c.created_at,
    )


def _refuse_kept(s: Session, caller: Caller, ident: str, action: str) -> None:
    """Invalid when `ident` is a deleted template a cluster keeps a copy of (that copy
    cannot be changed or deleted); returns when it is not (then NotFound stands)."""
    kept = kept_copy(s, caller, ident)
    if kept is not None:
        raise Invalid(
            f"cluster template {ident} was deleted; what GET shows is the read-only copy "
            f"cluster {kept.source_id} keeps of it, which cannot be {action}. To get a "
            f"template to change, create one from the cluster (POST /v1/clustertemplates "
            f'with "from_cluster": "{kept.source_id}").',
            "uuid",
        )


def list_page(db: Database, caller: Caller, page: Page) -> list[m.ClusterTemplate]:
    policy.enforce(caller, "clustertemplate:get")
    with db.read() as s:
        return templates.list_cts(s, caller.scope, page)


def update(db: Database, caller: Caller, ident: str, patch: Any) -> m.ClusterTemplate:
    """JSON-patch on attributes, name and the embedded NGT list (replaced whole)."""
    policy.enforce(caller, "clustertemplate:update")
    with db.write() as s:
        found = _find_changeable(s, caller, ident, "changed")
        if found.project_id != caller.project_id and not caller.is_admin:
            raise Invalid("a public template of another project cannot be changed", "project_id")
        current = {**found.attrs, "name": found.name}
        changes = jsonpatch.apply(current, patch, PATCHABLE, kind="clustertemplate")
        name = found.name
        if "name" in changes:
            name = v.name("name", changes.pop("name"))
        ngts_raw = changes.pop("node_group_templates", ...)
        checked = specs.check_attrs(
            "clustertemplate",
            {k: x for k, x in changes.items() if x is not None},
            specs.TEMPLATE_ATTRS,
        )
        attrs = dict(found.attrs)
        for k in changes:
            attrs.pop(k, None)
        attrs.update(checked)
        _check_publish(caller, checked)
        if ngts_raw is ...:
            ct = templates.get_ct(s, caller.scope, found.uuid)
            ngts = entries.as_written(ct.node_group_templates, templates.referenced_ngts(s, ct))
        else:
            given = _parse_entries(ngts_raw)
            ct = templates.get_ct(s, caller.scope, found.uuid)
            vm_templates.enforce(
                caller, (e.attrs for e in given), vm_templates.kept_by(ct.node_group_templates)
            )
            ngts = sources.template_entries(s, caller.project_id, given, caller.limits)
        attrs = _with_distro(attrs)
        _require(attrs, ngts)
        if ngts_raw is not ...:
            templates.replace_embedded(s, found.uuid, found.project_id, ngts)
        return templates.update_ct(s, found.uuid, name, attrs)


def delete(db: Database, caller: Caller, ident: str) -> None:
    """Templates are freely deletable: clusters made from them copied what they need."""
    policy.enforce(caller, "clustertemplate:delete")
    with db.write() as s:
        found = _find_changeable(s, caller, ident, "deleted")
        if found.project_id != caller.project_id and not caller.is_admin:
            raise Invalid("a public template of another project cannot be deleted", "project_id")
        templates.delete_ct(s, found.uuid)


def _find_changeable(s: Session, caller: Caller, ident: str, action: str) -> TemplateRef:
    try:
        return templates.find_ct(s, caller.scope, ident)
    except NotFound:
        _refuse_kept(s, caller, ident, action)
        raise
