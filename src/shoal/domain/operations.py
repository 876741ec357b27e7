"""Operations on the nodes of a node group, as pure rules: which kinds exist, what
parameters each takes, which nodes go next (one by one, or in batches), and when
an operation has ended.

Agent kinds run on the node, through its agent (restart services, upgrade
packages or container images in place, rebase an rpm-ostree image, set labels
and taints); driver kinds are the cloud's (reboot, rebuild with a new image
keeping the node's identity, replace with a new machine). An operation stops at
the first node that fails: the nodes after it are left as they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.agent import protocol
from shoal.domain import validation as v
from shoal.domain.errors import Invalid

REBOOT, REBUILD, REPLACE = "reboot", "rebuild", "replace"
DRIVER_KINDS = (REBOOT, REBUILD, REPLACE)
AGENT_KINDS = protocol.AGENT_KINDS
KINDS = (*AGENT_KINDS, *DRIVER_KINDS)
# Operation and task states (a task's are the agent protocol's).
RUNNING, SUCCEEDED, FAILED = protocol.RUNNING, protocol.SUCCEEDED, protocol.FAILED
PENDING = protocol.PENDING
NAMES_MAX = 64
ARGUMENT_MAX = 1024


def check(kind: Any, params: Any) -> tuple[str, dict[str, Any]]:
    """The kind and its parameters, checked (Invalid naming the field otherwise)."""
    if kind not in KINDS:
        raise Invalid(f"kind must be one of: {', '.join(KINDS)}", "kind")
    params = v.literal(params) if params is not None else {}
    if not isinstance(params, dict):
        raise Invalid("params must be an object", "params")
    allowed = {
        protocol.RESTART_SERVICES: {"services"},
        protocol.UPGRADE_PACKAGES: {"packages"},
        protocol.UPGRADE_IMAGES: {"images"},
        protocol.REBASE: {"ref"},
        protocol.SET_LABELS: {"labels", "taints"},
        REBOOT: set(),
        REBUILD: {"image_id"},
        REPLACE: set(),
    }[kind]
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise Invalid(f"params.{unknown[0]} is not a parameter of {kind}", "params")
    out: dict[str, Any] = {}
    for key in ("services", "packages", "images"):
        if key in params:
            entries = v.str_list(f"params.{key}", params[key], NAMES_MAX)
            out[key] = [argument(f"params.{key}", e) for e in entries]
    if kind == protocol.RESTART_SERVICES:
        out.setdefault("services", ["kubelet"])
    if kind in (protocol.UPGRADE_PACKAGES, protocol.UPGRADE_IMAGES):
        key = "packages" if kind == protocol.UPGRADE_PACKAGES else "images"
        if not out.get(key):
            raise Invalid(f"params.{key} is required for {kind}", "params")
    if kind == protocol.REBASE:
        out["ref"] = argument("params.ref", params.get("ref"))
    if kind == REBUILD and params.get("image_id") is not None:
        out["image_id"] = v.string("params.image_id", params["image_id"])
    if kind == protocol.SET_LABELS:
        out["labels"] = v.str_dict("params.labels", params.get("labels") or {})
        out["taints"] = [t.as_dict() for t in v.taints("params.taints", params.get("taints"))]
    return kind, out


def argument(field: str, value: Any) -> str:
    """One word a node's command is given (a service, a package, an image, an ostree
    ref): no blanks or control characters, and not an option (a leading '-')."""
    if not isinstance(value, str) or not value:
        raise Invalid(f"{field} must be a non-empty string", field)
    if len(value) > ARGUMENT_MAX:
        raise Invalid(f"{field} must be at most {ARGUMENT_MAX} characters", field)
    if value.startswith("-") or any(c.isspace() or not c.isprintable() for c in value):
        raise Invalid(
            f"{field} {value!r} is invalid: one word, without blanks, not starting with '-'",
            field,
        )
    return value


def by_agent(kind: str) -> bool:
    """Whether the node's agent runs this kind (else the conductor, through the driver)."""
    return kind in AGENT_KINDS


def next_nodes(targets: Sequence[str], states: Mapping[str, str], batch_size: int) -> list[str]:
    """The target nodes to start now: in order, so that at most `batch_size` are under
    way at once (started and not ended)."""
    busy = sum(1 for n in targets if states.get(n) in (PENDING, RUNNING))
    room = max(0, batch_size - busy)
    return [n for n in targets if n not in states][:room]


def outcome(targets: Sequence[str], states: Mapping[str, str]) -> str:
    """RUNNING, SUCCEEDED (every target's task did), or FAILED (one did not)."""
    if any(states.get(n) in (FAILED, protocol.CANCELLED) for n in targets):
        return FAILED
    if all(states.get(n) == SUCCEEDED for n in targets):
        return SUCCEEDED
    return RUNNING
