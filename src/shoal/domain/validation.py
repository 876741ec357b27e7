"""Field rules for request attributes: types, names, counts, taints, policies.

Pure functions over plain JSON values. Every failure raises `Invalid` (or
`Conflict` for count bounds, as Magnum does) naming the field and the rule.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shoal.domain import model as m
from shoal.domain.errors import Conflict, Invalid

NAME_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.-]*$")
# What a required id holds: a character that is not a blank ("" and "   " name
# nothing). The OpenAPI document states the same pattern (api/schemas.py, `ID`).
PRESENT_RE = re.compile(r"\S")
CLUSTER_NAME_MAX = 242
NAME_MAX = 255
# nodegroups.version holds a group's coe_version (or a template's kube_tag label).
VERSION_MAX = 64
LABEL_KEY_MAX = 253
# The largest integer an INTEGER column holds on every backend (PostgreSQL's
# int4): a bigger count, size or limit is refused here rather than by the database.
INT_MAX = 2**31 - 1
DEFAULT_FLAVOR = "m1.small"
# ASCII digits only: str.isdigit() and the re module's \d also take "١٢" or "²",
# which are not ids a client meant (and int("²") raises).
_DECIMAL = re.compile(r"-?[0-9]+")
# Past this many digits a number is beyond every bound here, and int() of 4,300+
# digits raises ValueError.
_DIGITS_MAX = 19
_JSON_SCALARS = (str, int, float, bool, type(None))

Checker = Callable[[str, Any], Any]

# What one request may carry, in one place (docs/api.md, "Limits"). A request past
# any of these gets 400 naming the field and the limit, and stores nothing; the
# body as a whole is bounded before it is read (settings.max_body_bytes, 413).
LABELS_MAX = 256  # keys in one labels / node_labels / health_status_reason map
LABEL_VALUE_MAX = 4096  # characters of one label value
TEXT_MAX = 8192  # characters of a URL or proxy list (http_proxy, no_proxy, discovery_url)
TAINTS_MAX = 64  # node_taints entries of one node group
AZS_MAX = 32  # availability_zones of one node group
VMS_MAX = 256  # vms entries of one virt host group
VM_ENTRY_MAX = 4096  # characters of one vms entry written as JSON
NODE_GROUPS_MAX = 100  # node_groups of a create request, node_group_templates of a template
PATCH_OPS_MAX = 256  # operations in one JSON-patch request
NODE_REF_MAX = 255  # characters of one nodes_to_remove entry


@dataclass(frozen=True)
class Limits:
    """How many nodes one node group and one cluster may hold (the operator's
    settings `max_nodes_per_group` / `max_nodes_per_cluster`). Counts are desired
    state the conductor acts on, so a count beyond what a site can run is refused
    at the door rather than discovered by the conductor."""

    nodes_per_group: int = 1000
    nodes_per_cluster: int = 5000


def group_nodes(field: str, count: int, limits: Limits) -> None:
    """Invalid (400) when `count` is above the per-group limit, naming the setting."""
    if count > limits.nodes_per_group:
        raise Invalid(
            f"{field} {count} is above the limit of {limits.nodes_per_group} nodes per node "
            "group (the operator can raise it: SHOAL_MAX_NODES_PER_GROUP)",
            field,
        )


def cluster_nodes(total: int, limits: Limits, field: str = "node_count") -> None:
    """Invalid (400) when a cluster would hold more nodes than the per-cluster limit."""
    if total > limits.nodes_per_cluster:
        raise Invalid(
            f"the cluster would have {total} nodes, above the limit of "
            f"{limits.nodes_per_cluster} nodes per cluster (the operator can raise it: "
            "SHOAL_MAX_NODES_PER_CLUSTER)",
            field,
        )


def spec_nodes(spec: m.NodeGroupSpec, limits: Limits, prefix: str = "") -> None:
    """A node group spec's node_count, min_node_count and max_node_count within the
    per-group limit (max_node_count too: it is what an autoscaler may grow to)."""
    group_nodes(f"{prefix}node_count", spec.node_count, limits)
    group_nodes(f"{prefix}min_node_count", spec.min_node_count, limits)
    if spec.max_node_count is not None:
        group_nodes(f"{prefix}max_node_count", spec.max_node_count, limits)


def bounded_list(field: str, value: list[Any], most: int) -> None:
    """Invalid when a list has more than `most` entries."""
    if len(value) > most:
        raise Invalid(f"{field} has {len(value)} entries; at most {most} are allowed", field)


def name(field: str, value: Any, max_len: int = NAME_MAX) -> str:
    """A resource name: starts with a letter, then letters, digits, `_ . -`."""
    if not isinstance(value, str) or not value:
        raise Invalid(f"{field} must be a non-empty string", field)
    if len(value) > max_len:
        raise Invalid(f"{field} must be at most {max_len} characters", field)
    if not NAME_RE.match(value):
        raise Invalid(
            f"{field} {value!r} is invalid: it must start with a letter and contain only "
            "letters, digits, '_', '.' and '-'",
            field,
        )
    return value


def string(field: str, value: Any) -> str | None:
    """An optional string of at most 255 characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{field} must be a string, not {_kind(value)}", field)
    if len(value) > NAME_MAX:
        raise Invalid(f"{field} must be at most {NAME_MAX} characters", field)
    return value


def required_id(field: str, value: Any, hint: str = "") -> str:
    """A required id or name of at most 255 characters: Invalid when it is missing,
    empty or only blanks (`hint`: what it names, where to find one)."""
    got = string(field, value)
    if got is None or not PRESENT_RE.search(got):
        raise Invalid(f"{field} is required" + (f": {hint}" if hint else ""), field)
    return got


def text(field: str, value: Any) -> str | None:
    """An optional string of at most TEXT_MAX characters (URLs, proxy lists)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{field} must be a string, not {_kind(value)}", field)
    if len(value) > TEXT_MAX:
        raise Invalid(f"{field} must be at most {TEXT_MAX} characters", field)
    return value


def integer(field: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """An integer (JSON number or ASCII decimal string) within [lo, hi] (hi: INT_MAX)."""
    hi = INT_MAX if hi is None else hi
    if isinstance(value, bool) or value is None:
        raise Invalid(f"{field} must be an integer, not {_kind(value)}", field)
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        digits = value.strip()
        if len(digits.lstrip("-").lstrip("0")) > _DIGITS_MAX:
            bound = f">= {lo}" if digits.startswith("-") and lo is not None else f"<= {hi}"
            raise Invalid(f"{field} must be {bound} (got {len(digits)} digits)", field)
        value = int(digits)
    if not isinstance(value, int):
        raise Invalid(f"{field} must be an integer, not {_kind(value)}", field)
    if lo is not None and value < lo:
        raise Invalid(f"{field} must be >= {lo} (got {value})", field)
    if value > hi:
        raise Invalid(f"{field} must be <= {hi} (got {value})", field)
    return value


def decimal_id(text: str) -> int | None:
    """`text` as a non-negative integer id (ASCII digits, at most INT_MAX), else None.

    For identifiers that may be a name or an integer id: anything else is not an
    id, so lookups never reach the database with a number its column cannot hold."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > _DIGITS_MAX:
        return None
    number = int(text)
    return number if number <= INT_MAX else None


def version(field: str, value: Any) -> str | None:
    """An optional version string of at most VERSION_MAX characters (coe_version)."""
    text = string(field, value)
    if text is not None and len(text) > VERSION_MAX:
        raise Invalid(f"{field} must be at most {VERSION_MAX} characters", field)
    return text


def opt_integer(field: str, value: Any, lo: int | None = None) -> int | None:
    """An integer or null."""
    return None if value is None else integer(field, value, lo)


# The strings Magnum's boolean type takes (oslo's strict bool_from_string), any case:
# magnum-ui sends "True"/"False", Terraform "true"/"false", the CLI what a user typed.
TRUE_STRINGS = frozenset({"1", "t", "true", "on", "y", "yes"})
FALSE_STRINGS = frozenset({"0", "f", "false", "off", "n", "no"})


def boolean(field: str, value: Any) -> bool:
    """A JSON boolean, or one of the strings Magnum takes for one (`TRUE_STRINGS`,
    `FALSE_STRINGS`, any case); anything else ("maybe", 2, null) is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_STRINGS or word in FALSE_STRINGS:
            return word in TRUE_STRINGS
        raise Invalid(
            f"{field} must be a boolean (true/false), not the string {value[:64]!r}", field
        )
    raise Invalid(f"{field} must be a boolean, not {_kind(value)}", field)


def blank(value: Any) -> bool:
    """Whether `value` is null or an empty (or all-space) string: what magnum-ui sends
    for an optional field left empty (it turns every None into "")."""
    return value is None or (isinstance(value, str) and not value.strip())


def literal(value: Any) -> Any:
    """A value that may arrive as a Python-literal string (`"{'a': 'b'}"`).

    A string that is no such literal stays a string, for the field's own check to
    refuse: a syntax error, a parser overwhelmed by nesting (RecursionError or, in
    CPython's parser, MemoryError), an unhashable key (TypeError), or a result
    that JSON cannot hold (sets, bytes, complex, infinite floats, non-string keys;
    see `json_problem`)."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            return value
        return value if json_problem(parsed) else parsed
    return value


def json_problem(value: Any) -> str | None:
    """Why `value` cannot be stored as JSON on every backend, or None when it can.

    Only dicts with string keys, lists and JSON scalars; no infinite or NaN number
    (JSON has none; PostgreSQL's jsonb refuses them); no string with a NUL
    (PostgreSQL's text and jsonb refuse it) or an unpaired surrogate (not UTF-8
    at all). Iterative, so any depth the JSON parser produced is walked."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    return f"object keys must be strings (got {key!r})"
                stack.append(key)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "strings must not contain NUL (\\u0000)"
            if not item.isascii() and not _utf8(item):
                return "strings must not contain unpaired surrogates (\\ud800-\\udfff)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "numbers must be finite (no NaN or Infinity)"
        elif not isinstance(item, _JSON_SCALARS):
            return f"a Python {type(item).__name__} is not a JSON value"
    return None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def str_dict(field: str, value: Any) -> dict[str, str]:
    """A {str: str} mapping (labels); values are turned into strings as Magnum does."""
    value = key_values(literal(value))
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{field} must be an object of string values, not {_kind(value)}", field)
    if len(value) > LABELS_MAX:
        raise Invalid(f"{field} has {len(value)} keys; at most {LABELS_MAX} are allowed", field)
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k or len(k) > LABEL_KEY_MAX:
            shown = k if not isinstance(k, str) or len(k) <= 64 else k[:64] + "..."
            raise Invalid(
                f"{field} keys must be non-empty strings of at most {LABEL_KEY_MAX} "
                f"characters (got {shown!r})",
                field,
            )
        if isinstance(v, dict | list) or v is None:
            raise Invalid(f"{field}[{k}] must be a string, not {_kind(v)}", field)
        out[k] = str(v).lower() if isinstance(v, bool) else str(v)
        if len(out[k]) > LABEL_VALUE_MAX:
            raise Invalid(f"{field}[{k}] must be at most {LABEL_VALUE_MAX} characters", field)
    return out


_KEY_VALUE = re.compile(r"[^=,\s][^=,]*=[^,]*(,[^=,\s][^=,]*=[^,]*)*")


def key_values(value: Any) -> Any:
    """A labels string in the `key=value,key2=value2` form (the form Magnum's CLI takes
    and Terraform's template update sends) as a dict; "" as an empty dict; any other
    value unchanged, for the field's own check."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return {}
    if not _KEY_VALUE.fullmatch(text):
        return value
    pairs = (item.split("=", 1) for item in text.split(","))
    return {k.strip(): x.strip() for k, x in pairs}


def str_list(field: str, value: Any, most: int = AZS_MAX) -> tuple[str, ...]:
    """A list of at most `most` non-empty strings of at most NAME_MAX characters
    (a comma-separated string is accepted too)."""
    value = literal(value)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise Invalid(f"{field} must be a list of non-empty strings", field)
    bounded_list(field, value, most)
    if any(len(v) > NAME_MAX for v in value):
        raise Invalid(f"{field} entries must be at most {NAME_MAX} characters", field)
    if len(set(value)) != len(value):
        raise Invalid(f"{field} must not repeat an entry", field)
    return tuple(value)


def choice(field: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of a fixed set of strings."""
    if value not in choices:
        raise Invalid(f"{field} must be one of {', '.join(choices)} (got {value!r})", field)
    return str(value)


def taints(field: str, value: Any) -> tuple[m.Taint, ...]:
    """`[{key, value, effect}]`; also `"key=value:Effect"` strings, as kubectl writes them."""
    value = literal(value)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise Invalid(f"{field} must be a list of {{key, value, effect}} objects", field)
    bounded_list(field, value, TAINTS_MAX)
    out = []
    for item in value:
        if isinstance(item, str):
            item = _taint_from_text(field, item)
        if not isinstance(item, dict) or set(item) - {"key", "value", "effect"}:
            raise Invalid(f"{field} entries must be {{key, value, effect}} objects", field)
        key = item.get("key")
        if not isinstance(key, str) or not key or len(key) > LABEL_KEY_MAX:
            raise Invalid(
                f"{field} entries need a non-empty key of at most {LABEL_KEY_MAX} characters",
                field,
            )
        val = item.get("value") or ""
        if not isinstance(val, str) or len(val) > NAME_MAX:
            raise Invalid(
                f"{field} value of {key!r} must be a string of at most {NAME_MAX} characters",
                field,
            )
        effect = item.get("effect")
        if effect not in m.TAINT_EFFECTS:
            raise Invalid(
                f"{field} effect of {key!r} must be one of {', '.join(m.TAINT_EFFECTS)} "
                f"(got {effect!r})",
                field,
            )
        out.append(m.Taint(key=key, value=val, effect=effect))
    return tuple(out)


def _taint_from_text(field: str, raw: str) -> dict[str, str]:
    key_value, _, effect = raw.rpartition(":")
    if not key_value:
        raise Invalid(f"{field} entry {raw!r} must look like key=value:Effect", field)
    key, _, val = key_value.partition("=")
    return {"key": key, "value": val, "effect": effect}


def rollout(field: str, value: Any) -> m.RolloutPolicy:
    """`{max_surge, max_unavailable}`: both >= 0 and not both 0."""
    value = literal(value)
    if value is None:
        return m.RolloutPolicy()
    data = _policy_dict(field, value, m.RolloutPolicy)
    policy = m.RolloutPolicy(**data)
    if policy.max_surge == 0 and policy.max_unavailable == 0:
        raise Invalid(f"{field}: max_surge and max_unavailable cannot both be 0", field)
    return policy


def health(field: str, value: Any) -> m.HealthPolicy:
    """`{startup_timeout_s, unhealthy_timeout_s, max_unhealthy_percent (0-100)}`."""
    value = literal(value)
    if value is None:
        return m.HealthPolicy()
    data = _policy_dict(field, value, m.HealthPolicy)
    if data.get("max_unhealthy_percent", 0) > 100:
        raise Invalid(f"{field}.max_unhealthy_percent must be <= 100", field)
    return m.HealthPolicy(**data)


def _policy_dict(field: str, value: Any, cls: type[Any]) -> dict[str, int]:
    if not isinstance(value, dict):
        raise Invalid(f"{field} must be an object, not {_kind(value)}", field)
    known = {f.name for f in dataclasses.fields(cls)}
    for k in value:
        if k not in known:
            raise Invalid(f"Unknown attribute for argument {field}: {k}", field)
    defaults = dataclasses.asdict(cls())
    return {k: integer(f"{field}.{k}", value.get(k, defaults[k]), lo=0) for k in known}


def vms(field: str, value: Any) -> tuple[dict[str, Any], ...]:
    """A virt host group's VMs: at most VMS_MAX objects of at most VM_ENTRY_MAX
    characters each (as JSON), rendered into domain XML by the libvirt driver."""
    value = literal(value)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise Invalid(f"{field} must be a list of objects", field)
    bounded_list(field, value, VMS_MAX)
    for i, entry in enumerate(value):
        if len(json.dumps(entry)) > VM_ENTRY_MAX:
            raise Invalid(f"{field}[{i}] must be at most {VM_ENTRY_MAX} characters as JSON", field)
    return tuple(dict(x) for x in value)


def counts(spec: m.NodeGroupSpec, *, allow_zero: bool = True) -> None:
    """node_count >= 0 (>= 1 before 1.10), min <= node_count <= max (Conflict, as Magnum)."""
    lowest = 0 if allow_zero else 1
    if spec.node_count < lowest:
        raise Invalid(f"node_count must be >= {lowest} (got {spec.node_count})", "node_count")
    if spec.min_node_count < 0:
        raise Invalid("min_node_count must be >= 0", "min_node_count")
    mx = spec.max_node_count
    if mx is not None and mx < spec.min_node_count:
        raise Conflict(
            f"min_node_count ({spec.min_node_count}) should be less or equal to "
            f"max_node_count ({mx})"
        )
    if spec.min_node_count > spec.node_count:
        raise Conflict(
            f"min_node_count ({spec.min_node_count}) should be less or equal to "
            f"node_count ({spec.node_count})"
        )
    if mx is not None and spec.node_count > mx:
        raise Conflict(
            f"node_count ({spec.node_count}) should be less or equal to max_node_count ({mx})"
        )


def master_total(total: int) -> None:
    """A cluster's masters, over all its master groups: at least one, and an odd number,
    so that etcd keeps a quorum when one is lost (an even count adds no fault tolerance)."""
    if total < 1:
        raise Invalid(
            "cannot remove the last master: a cluster needs at least one master node "
            "(master_count >= 1)",
            "master_count",
        )
    if total % 2 == 0:
        raise Invalid(
            f"master_count must be odd (1, 3, 5, ...) for an etcd quorum; got {total}",
            "master_count",
        )


def reject_unknown(kind: str, body: Mapping[str, Any], known: set[str] | frozenset[str]) -> None:
    """Magnum's "Unknown attribute for argument <kind>: foo"."""
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise Invalid(f"Unknown attribute for argument {kind}: {', '.join(unknown)}", unknown[0])


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "list" if isinstance(value, list) else "object"
    )
