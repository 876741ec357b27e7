"""Turning command-line strings into request bodies: key=value pairs, node group
specs (`name=gpu,role=worker,flavor=g1.large,count=2,az=az-1+az-2`) and the
JSON-patch list built from `--set key=value` / `--unset key`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shoal.cli.client import fail

# Short keys accepted in node group specs, and the API attribute each stands for.
# What a node group spec entry may copy: a node group template, or a node group.
SOURCE_KEYS = ("nodegroup_template_id", "from_nodegroup")
SPEC_ALIASES = {
    "flavor": "flavor_id",
    "image": "image_id",
    "count": "node_count",
    "min": "min_node_count",
    "max": "max_node_count",
    "az": "availability_zones",
    "azs": "availability_zones",
    "volume": "docker_volume_size",
    "policy": "deletion_policy",
    "ngt": "nodegroup_template_id",
    "from": "from_nodegroup",
}
# Keys whose values stay strings (names and uuids that may look like numbers).
_STR_KEYS = ("name", "role", "flavor_id", "image_id", "deletion_policy", *SOURCE_KEYS)
_INT_KEYS = {"node_count", "min_node_count", "max_node_count", "docker_volume_size"}
# Node group attributes that the `nodegroup create` options also set.
NG_KEYS = ("role", "flavor_id", "image_id", "node_count", "min_node_count", "max_node_count")


def scalar(raw: str) -> Any:
    """A command-line value as JSON when it parses (numbers, true, lists), else the string;
    `@path` is the file's content (as JSON when it parses: `vms=@vms.json`, else the text:
    `vm_template=@domain.xml`)."""
    if raw.startswith("@") and len(raw) > 1:
        path = Path(raw[1:])
        try:
            raw = path.read_text()
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror}", 2)
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def split_pair(item: str, what: str) -> tuple[str, str]:
    """`key=value` -> (key, value); a clear error otherwise."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        fail(f"{what} must look like KEY=VALUE, got {item!r}", 2)
    return key.strip(), value


def pairs(items: Iterable[str] | None, what: str) -> dict[str, str]:
    """Repeated `KEY=VALUE` options (also comma-separated in one) -> dict of strings."""
    out: dict[str, str] = {}
    for item in items or ():
        for part in item.split(","):
            if part.strip():
                key, value = split_pair(part, what)
                out[key] = value
    return out


def taints(items: Iterable[str] | None) -> list[dict[str, str]]:
    """`key=value:Effect` (repeatable) -> [{key, value, effect}]."""
    out = []
    for item in items or ():
        kv, sep, effect = item.rpartition(":")
        key, _, value = kv.partition("=")
        if not sep or not key:
            fail(f"--taint must look like KEY=VALUE:EFFECT, got {item!r}", 2)
        out.append({"key": key, "value": value, "effect": effect})
    return out


def nodegroup_spec(text: str) -> dict[str, Any]:
    """`name=gpu,role=worker,flavor=g1.large,count=2,az=az-1+az-2,label.k=v` -> NG attributes;
    `ngt=NGT` or `from=NODEGROUP_UUID` copies a node group template or a node group (then
    `name` is optional)."""
    spec: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, value = split_pair(part, "a node group spec entry")
        if key.startswith("label."):
            labels[key[len("label.") :]] = value
            continue
        attr = SPEC_ALIASES.get(key, key)
        if attr == "availability_zones":
            spec[attr] = [z for z in value.replace("+", " ").split() if z]
        elif attr in _INT_KEYS:
            try:
                spec[attr] = int(value)
            except ValueError:
                fail(f"{key} must be an integer in {text!r}", 2)
        elif attr in _STR_KEYS:
            spec[attr] = value
        else:
            spec[attr] = scalar(value)
    if labels:
        spec["node_labels"] = labels
    if "name" not in spec and not any(k in spec for k in SOURCE_KEYS):
        fail(f"a node group spec needs name=... (or ngt=... / from=...), got {text!r}", 2)
    return spec


def json_patch(sets: Iterable[str] | None, unsets: Iterable[str] | None) -> list[dict[str, Any]]:
    """`--set a=1 --unset b` -> [{op: replace, path: /a, value: 1}, {op: remove, path: /b}].

    `--set labels.key=value` edits one entry of a dict attribute as `add /labels/key`.
    """
    ops: list[dict[str, Any]] = []
    for item in sets or ():
        key, value = split_pair(item, "--set")
        path = "/" + key.replace(".", "/")
        op = "add" if "." in key else "replace"
        ops.append({"op": op, "path": path, "value": value if "." in key else scalar(value)})
    for key in unsets or ():
        ops.append({"op": "remove", "path": "/" + key.strip().replace(".", "/")})
    if not ops:
        fail("nothing to change: give --set KEY=VALUE and/or --unset KEY", 2)
    return ops


def drop_none(body: dict[str, Any]) -> dict[str, Any]:
    """The body without options the user did not give."""
    return {k: v for k, v in body.items() if v is not None and v != [] and v != {}}
