"""The JSON-patch subset Magnum accepts: add, replace, remove on top-level paths
(and one level into dict attributes such as `/labels/key`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from shoal.domain import validation as v
from shoal.domain.errors import Invalid

OPS = ("add", "replace", "remove")
NEVER = frozenset({"uuid", "id", "created_at", "updated_at", "links", "project_id", "user_id"})
DICT_ATTRS = frozenset({"labels", "node_labels", "health_status_reason"})


def apply(
    current: Mapping[str, Any],
    patch: Any,
    allowed: Collection[str],
    *,
    kind: str = "cluster",
) -> dict[str, Any]:
    """The attributes that change: {attr: new value or None when removed}.

    `current` gives the values `/attr/key` paths update; refused paths name
    themselves in Magnum's words ("cannot change cluster property(ies) name").
    """
    if not isinstance(patch, list):
        raise Invalid("the body must be a JSON-patch list of {op, path, value}", "patch")
    v.bounded_list("patch", patch, v.PATCH_OPS_MAX)
    changes: dict[str, Any] = {}
    refused: list[str] = []
    for op in patch:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise Invalid("each patch operation must be an object with op and path", "patch")
        unknown = set(op) - {"op", "path", "value"}
        if unknown:
            raise Invalid(f"Unknown attribute for argument patch: {sorted(unknown)[0]}", "patch")
        name = op.get("op")
        if name not in OPS:
            raise Invalid(f"patch op must be one of {', '.join(OPS)} (got {name!r})", "op")
        parts = [p for p in op["path"].split("/") if p]
        if not parts or len(parts) > 2 or not op["path"].startswith("/"):
            raise Invalid(f"invalid patch path {op['path']!r}", "path")
        attr = parts[0]
        if attr in NEVER:
            raise Invalid(f"'/{attr}' is an internal attribute and can not be updated", attr)
        if attr not in allowed:
            refused.append(attr)
            continue
        if name != "remove" and "value" not in op:
            raise Invalid(f"patch op {name} on /{attr} needs a value", attr)
        if len(parts) == 2:
            if attr not in DICT_ATTRS:
                raise Invalid(f"invalid patch path {op['path']!r}", "path")
            base = changes.get(attr, current.get(attr)) or {}
            if isinstance(base, str):
                base = v.literal(base)
            sub = dict(base) if isinstance(base, dict) else {}
            if name == "remove":
                sub.pop(parts[1], None)
            else:
                sub[parts[1]] = op["value"]
            changes[attr] = sub
        else:
            changes[attr] = None if name == "remove" else v.literal(op["value"])
    if refused:
        raise Invalid(
            f"cannot change {kind} property(ies) {', '.join(sorted(set(refused)))}", refused[0]
        )
    return changes
