"""Node group template use cases: create (from attributes, a node group or another
NGT), update, delete (refused while a cluster template references it)."""

from __future__ import annotations

import secrets
from typing import Any

from shoal.db.engine import Database
from shoal.db.repo import nodegroups, templates
from shoal.db.repo.paging import Page
from shoal.domain import jsonpatch, merge, policy, specs
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid
from shoal.services import vm_templates
from shoal.services.context import Caller

CREATE_KEYS = specs.NODEGROUP_KEYS | {
    "name",
    "from_nodegroup",
    "from_nodegrouptemplate",
    "project_id",
}
PATCHABLE = specs.NODEGROUP_KEYS | {"name"}


def create(db: Database, caller: Caller, body: dict[str, Any]) -> m.NodeGroupTemplate:
    """All attributes; `from_nodegroup` (a node group of the project); or
    `from_nodegrouptemplate` (a standalone NGT of the project); either plus overrides."""
    policy.enforce(caller, "nodegrouptemplate:create")
    v.reject_unknown("nodegrouptemplate", body, CREATE_KEYS)
    if body.get("from_nodegroup") is not None and body.get("from_nodegrouptemplate") is not None:
        raise Invalid(
            "give from_nodegroup or from_nodegrouptemplate, not both", "from_nodegrouptemplate"
        )
    name = v.name("name", body["name"]) if body.get("name") is not None else None
    overrides = {k: x for k, x in body.items() if k in specs.NODEGROUP_KEYS}
    vm_templates.enforce(caller, [overrides])
    with db.write() as s:
        base = m.NodeGroupSpec()
        source_id = None
        if body.get("from_nodegroup") is not None:
            ident = v.string("from_nodegroup", body["from_nodegroup"]) or ""
            group = nodegroups.find_any(s, caller.scope, ident)
            base, source_id = group.spec, group.uuid
            name = name or group.name
        elif body.get("from_nodegrouptemplate") is not None:
            ident = v.string("from_nodegrouptemplate", body["from_nodegrouptemplate"]) or ""
            src = templates.get_ngt(s, caller.scope, ident)
            base, source_id = src.spec, src.uuid
        spec = merge.ngt_spec(base, overrides, caller.limits)
        return templates.insert_ngt(
            s,
            project_id=caller.project_id,
            name=name or f"ngt-{secrets.token_hex(4)}",
            spec=spec,
            source_id=source_id,
        )


def get(db: Database, caller: Caller, ident: str) -> m.NodeGroupTemplate:
    policy.enforce(caller, "nodegrouptemplate:get")
    with db.read() as s:
        return templates.get_ngt(s, caller.scope, ident)


def list_page(db: Database, caller: Caller, page: Page) -> list[m.NodeGroupTemplate]:
    policy.enforce(caller, "nodegrouptemplate:get")
    with db.read() as s:
        return templates.list_ngts(s, caller.scope, page)


def update(db: Database, caller: Caller, ident: str, patch: Any) -> m.NodeGroupTemplate:
    policy.enforce(caller, "nodegrouptemplate:update")
    with db.write() as s:
        ngt = templates.get_ngt(s, caller.scope, ident)
        current = {**specs.spec_as_attrs(ngt.spec), "name": ngt.name}
        changes = jsonpatch.apply(current, patch, PATCHABLE, kind="nodegrouptemplate")
        vm_templates.enforce(caller, [changes], kept=[ngt.spec.vm_template])
        name = v.name("name", changes.pop("name")) if "name" in changes else ngt.name
        defaults = specs.spec_as_attrs(m.NodeGroupSpec())
        attrs = {k: (defaults.get(k) if x is None else x) for k, x in changes.items()}
        spec = merge.ngt_spec(ngt.spec, attrs, caller.limits)
        return templates.update_ngt(s, ngt.uuid, name, spec)


def delete(db: Database, caller: Caller, ident: str) -> None:
    """Refused while a cluster template references it: the template would break."""
    policy.enforce(caller, "nodegrouptemplate:delete")
    with db.write() as s:
        ngt = templates.get_ngt(s, caller.scope, ident, for_update=True)
        users = templates.referencing_cts(s, ngt.uuid)
        if users:
            raise Conflict(
                f"NodeGroupTemplate {ngt.name} is referenced by cluster template(s) "
                f"{', '.join(users)}; change or delete them first"
            )
        templates.delete_ngt(s, ngt.uuid)
