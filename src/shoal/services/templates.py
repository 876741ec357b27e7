"""Cluster template use cases: create (from attributes or from a cluster), update, delete."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from shoal.db.engine import Database
from shoal.db.repo import clusters, nodegroups, templates
from shoal.db.repo.paging import Page
from shoal.domain import jsonpatch, merge, specs
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Invalid
from shoal.services.context import Caller

CREATE_KEYS = frozenset(specs.TEMPLATE_ATTRS) | {
    "name",
    "node_group_templates",
    "from_cluster",
    "project_id",
    "user_id",
}
PATCHABLE = frozenset(specs.TEMPLATE_ATTRS) | {"name", "node_group_templates"}


def _embedded(raw: Any, limits: v.Limits) -> list[tuple[str, m.NodeGroupSpec, str | None]]:
    """Embedded node group templates, each within the per-group node limit and
    together within the per-cluster one (a cluster made from the template gets them)."""
    entries = v.literal(raw)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise Invalid("node_group_templates must be a list of objects", "node_group_templates")
    v.bounded_list("node_group_templates", entries, v.NODE_GROUPS_MAX)
    out: list[tuple[str, m.NodeGroupSpec, str | None]] = []
    for e in entries:
        if not isinstance(e, dict):
            raise Invalid("node_group_templates entries must be objects", "node_group_templates")
        v.reject_unknown("node_group_templates", e, specs.NODEGROUP_KEYS | {"name"})
        name = v.name("node_group_templates.name", e.get("name"))
        out.append((name, merge.ngt_spec(m.NodeGroupSpec(), e, limits), None))
    v.cluster_nodes(sum(spec.node_count for _, spec, _ in out), limits)
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise Invalid("node_group_templates names must be unique", "node_group_templates")
    return out


def _require(
    attrs: dict[str, Any], ngts: Sequence[tuple[str, m.NodeGroupSpec, str | None]]
) -> None:
    if not attrs.get("coe"):
        raise Invalid("coe is required (kubernetes)", "coe")
    if not attrs.get("image_id") and not (ngts and all(s.image_id for _, s, _ in ngts)):
        raise Invalid("image_id is required", "image_id")


def create(db: Database, caller: Caller, body: dict[str, Any]) -> m.ClusterTemplate:
    """From attributes, or `from_cluster` (its node groups become embedded NGTs) + overrides."""
    v.reject_unknown("clustertemplate", body, CREATE_KEYS)
    name = v.name("name", body["name"]) if body.get("name") is not None else _gen_name()
    attrs = specs.check_attrs("clustertemplate", body, specs.TEMPLATE_ATTRS)
    ngts = _embedded(body.get("node_group_templates"), caller.limits)
    with db.write() as s:
        source_id = None
        base: dict[str, Any] = {}
        if body.get("from_cluster") is not None:
            ident = v.string("from_cluster", body["from_cluster"]) or ""
            src = clusters.find_row(s, caller.project_id, ident)
            source_id = src.uuid
            base = merge.cluster_to_template_attrs(src.attrs or {})
            if "node_group_templates" not in body:
                ngts = [
                    (g.name, g.spec, g.uuid)
                    for g in nodegroups.of_cluster(s, src.uuid)
                    if not g.deleting
                ]
        merged = {"coe": "kubernetes", **base, **attrs} if base else {**attrs}
        merged = {k: x for k, x in merged.items() if x is not None}
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


def _gen_name() -> str:
    return f"template-{secrets.token_hex(4)}"


def get(db: Database, caller: Caller, ident: str) -> m.ClusterTemplate:
    with db.read() as s:
        return templates.get_ct(s, caller.project_id, ident)


def list_page(db: Database, caller: Caller, page: Page) -> list[m.ClusterTemplate]:
    with db.read() as s:
        return templates.list_cts(s, caller.project_id, page)


def update(db: Database, caller: Caller, ident: str, patch: Any) -> m.ClusterTemplate:
    """JSON-patch on attributes, name and the embedded NGT list (replaced whole)."""
    with db.write() as s:
        row = templates.find_ct_row(s, caller.project_id, ident)
        if row.project_id != caller.project_id:
            raise Invalid("a public template of another project cannot be changed", "project_id")
        current = {**(row.attrs or {}), "name": row.name}
        changes = jsonpatch.apply(current, patch, PATCHABLE, kind="clustertemplate")
        name = row.name
        if "name" in changes:
            name = v.name("name", changes.pop("name"))
        ngts_raw = changes.pop("node_group_templates", ...)
        checked = specs.check_attrs(
            "clustertemplate",
            {k: x for k, x in changes.items() if x is not None},
            specs.TEMPLATE_ATTRS,
        )
        attrs = dict(row.attrs or {})
        for k in changes:
            attrs.pop(k, None)
        attrs.update(checked)
        ct = templates.get_ct(s, caller.project_id, row.uuid)
        ngts = (
            [(n.name, n.spec, n.source_id) for n in ct.node_group_templates]
            if ngts_raw is ...
            else _embedded(ngts_raw, caller.limits)
        )
        _require(attrs, ngts)
        if ngts_raw is not ...:
            templates.replace_embedded(s, row, ngts)
        return templates.update_ct(s, row, name, attrs)


def delete(db: Database, caller: Caller, ident: str) -> None:
    """Templates are freely deletable: clusters made from them copied what they need."""
    with db.write() as s:
        row = templates.find_ct_row(s, caller.project_id, ident)
        if row.project_id != caller.project_id:
            raise Invalid("a public template of another project cannot be deleted", "project_id")
        templates.delete_ct(s, row)
