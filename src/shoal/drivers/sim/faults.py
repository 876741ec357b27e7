"""Injectable faults with Nova's failure classes, and the seeded randomness behind them.

A rule names a failure kind, optionally matches on zone, cluster, node group or
flavor, and fires at most `count` times (None: always) with `probability`.
Whether it fires is decided by a hash of (seed, rule, machine, attempt), never
by global random state, so one seed replays the same run.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from typing import Any

from shoal.domain.errors import Invalid


class FaultKind(enum.StrEnum):
    QUOTA_EXCEEDED = "quota_exceeded"  # create: BlockedError(QUOTA)
    NO_VALID_HOST = "no_valid_host"  # create: BlockedError(NO_VALID_HOST, az)
    SERVER_ERROR = "server_error"  # create succeeds; the server ends in ERROR
    NO_VALID_HOST_ASYNC = "no_valid_host_async"  # create succeeds; ERROR "No valid host"
    DRIVER_BUG = "driver_bug"  # list or create raises what no driver may (KeyError)
    TRANSIENT = "transient"  # any op: TransientError (HTTP 500/503/429)
    DELETE_FAILS_ONCE = "delete_fails_once"  # the first delete of a server fails


class Op(enum.StrEnum):
    CREATE = "create"
    DELETE = "delete"
    LIST = "list"
    REBOOT = "reboot"
    REBUILD = "rebuild"
    ANY = "any"


# The op a kind applies to; only TRANSIENT lets the rule choose.
_KIND_OP = {
    FaultKind.QUOTA_EXCEEDED: Op.CREATE,
    FaultKind.NO_VALID_HOST: Op.CREATE,
    FaultKind.SERVER_ERROR: Op.CREATE,
    FaultKind.NO_VALID_HOST_ASYNC: Op.CREATE,
    FaultKind.DELETE_FAILS_ONCE: Op.DELETE,
}
# The op a rule of this kind applies to when it names none.
_DEFAULT_OP = {FaultKind.DRIVER_BUG: Op.LIST}
DEFAULT_MESSAGES = {
    FaultKind.QUOTA_EXCEEDED: "quota exceeded: instances (injected fault)",
    FaultKind.NO_VALID_HOST: "No valid host was found. There are not enough hosts available.",
    FaultKind.SERVER_ERROR: "Build of instance aborted: Failed to allocate the network(s).",
    FaultKind.NO_VALID_HOST_ASYNC: "No valid host was found. There are not enough hosts available.",
    FaultKind.DRIVER_BUG: "'flavorRef' (an injected bug: the driver raised KeyError)",
    FaultKind.TRANSIENT: "Internal Server Error (HTTP 500)",
    FaultKind.DELETE_FAILS_ONCE: "Conflict: cannot delete instance while it is in task_state "
    "deleting; please retry (HTTP 409)",
}
RULE_FIELDS = (
    "kind",
    "op",
    "az",
    "cluster",
    "nodegroup",
    "flavor",
    "count",
    "probability",
    "message",
    "status",
    "retry_after",
)


@dataclass(frozen=True)
class FaultRule:
    """One fault rule as stored; `fired` counts how often it has fired so far."""

    id: int
    kind: FaultKind
    op: Op
    az: str | None = None
    cluster: str | None = None
    nodegroup: str | None = None
    flavor: str | None = None
    count: int | None = None
    probability: float = 1.0
    message: str | None = None
    status: int | None = None
    retry_after: float | None = None
    fired: int = 0

    def matches(self, op: Op, az: str | None, cluster: str, nodegroup: str, flavor: str) -> bool:
        """Whether this rule applies to a call (its firing still depends on count and odds)."""
        return (
            (self.op is op or self.op is Op.ANY)
            and (self.az is None or self.az == az)
            and (self.cluster is None or self.cluster == cluster)
            and (self.nodegroup is None or self.nodegroup == nodegroup)
            and (self.flavor is None or self.flavor == flavor)
        )

    @property
    def text(self) -> str:
        return self.message or DEFAULT_MESSAGES[self.kind]

    def as_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in ("id", *RULE_FIELDS, "fired")}
        d["kind"], d["op"] = str(self.kind), str(self.op)
        d["message"] = self.text
        return d


def unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from `parts` (seeded randomness without state)."""
    key = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2.0**64


def jittered(mean: float, jitter: float, *parts: object) -> float:
    """`mean` scaled by a deterministic factor in [1 - jitter, 1 + jitter]."""
    if mean <= 0:
        return 0.0
    return mean * (1.0 + jitter * (2.0 * unit(*parts) - 1.0))


def check_rule(body: dict[str, Any]) -> dict[str, Any]:
    """Validate a new rule's fields (Invalid if wrong) and fill in its defaults."""
    try:
        kind = FaultKind(str(body.get("kind")))
    except ValueError:
        kinds = ", ".join(k.value for k in FaultKind)
        raise Invalid(f"fault kind must be one of: {kinds}", field="kind") from None
    default_op = _KIND_OP.get(kind, _DEFAULT_OP.get(kind, Op.CREATE))
    try:
        op = Op(body.get("op") or default_op)
    except ValueError:
        raise Invalid("op must be one of: " + ", ".join(o.value for o in Op), field="op") from None
    if kind in _KIND_OP and op is not default_op:
        raise Invalid(f"a {kind} fault applies to {default_op} only", field="op")
    if kind is FaultKind.DRIVER_BUG and op not in (Op.LIST, Op.CREATE):
        raise Invalid("a driver_bug fault applies to list or create", field="op")
    prob = body.get("probability", 1.0)
    if prob is None or not 0.0 <= float(prob) <= 1.0:
        raise Invalid("probability must be between 0 and 1", field="probability")
    count = body.get("count")
    if count is not None and int(count) < 0:
        raise Invalid("count must be >= 0 (or null for no limit)", field="count")
    status = body.get("status")
    if kind is FaultKind.TRANSIENT and status is not None and status not in (429, 500, 502, 503):
        raise Invalid("status must be one of 429, 500, 502, 503", field="status")
    unknown = set(body) - set(RULE_FIELDS)
    if unknown:
        raise Invalid(f"unknown fault fields: {', '.join(sorted(unknown))}")
    out = {f: body.get(f) for f in RULE_FIELDS}
    out.update(kind=str(kind), op=str(op), probability=float(prob))
    out["count"] = None if count is None else int(count)
    return out
