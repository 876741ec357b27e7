"""What shoal reads from a cluster's Kubernetes Node objects and what it wants of
them, as pure rules on plain values (the conductor reads and writes them through
`shoal.kube`; docs/kubernetes.md, "Kubernetes feeds shoal back").

- **Readiness.** A node whose Node object says Ready is not True (False, or
  Unknown once the node controller stops hearing from its kubelet) for longer than
  the health policy's `unhealthy_timeout_s` is unhealthy, with Kubernetes' own
  reason and message; a node that was ready as a machine but never registered
  within `startup_timeout_s` is unhealthy too. What the API server does not say
  (unreachable, no Ready condition yet) judges nothing: the agents' heartbeats
  still do.
- **Labels and taints.** The group's `node_labels` and `node_taints`, plus the
  label naming the group, are kept on its Node objects (reconciled every pass,
  not set once). What shoal set is recorded in two annotations, so that a label
  or taint removed from the group is removed from the Node, and what others set
  (kubectl, the node controller's own taints) is left alone.
- **Drain.** Before a node's machine goes, its Node is cordoned and its pods are
  evicted (not DaemonSet pods, mirror pods or finished ones); shoal waits until
  none is left or the drain timeout passes, then goes on and says which way it
  went. A node Kubernetes does not report Ready cannot act on evictions: they are
  asked for without waiting.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from shoal.domain.model import Taint

PREFIX = "shoal.local"
GROUP_LABEL = f"{PREFIX}/nodegroup"  # the node group's uuid, on each of its Nodes
LABELS_NOTE = f"{PREFIX}/labels"  # annotation: the label keys shoal set, comma-separated
TAINTS_NOTE = f"{PREFIX}/taints"  # annotation: the taints shoal set, "key:Effect", comma-separated
MESSAGE_MAX = 200  # characters of Kubernetes' own message kept in a reason

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_NAME = re.compile(rf"^{_NAME}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class KubeNode:
    """One Node object, as far as shoal looks at it."""

    name: str
    ready: str = ""  # the Ready condition's status: True, False, Unknown ("" none yet)
    reason: str = ""
    message: str = ""
    since: datetime | None = None  # the Ready condition's last transition
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    resource_version: str = ""


@dataclass(frozen=True)
class Pod:
    """One pod on a node, as far as a drain looks at it."""

    namespace: str
    name: str
    owner_kind: str = ""  # the kind of its controller (DaemonSet, ReplicaSet, ...)
    mirror: bool = False  # a static pod's mirror: the kubelet owns it
    phase: str = ""
    deleting: bool = False  # deletionTimestamp set: evicted, terminating

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ClusterView:
    """One read of a cluster's API server: its Nodes by name, the pods of the nodes
    being drained, or why it could not be read."""

    nodes: Mapping[str, KubeNode] = field(default_factory=dict)
    pods: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict)  # by node name
    error: str | None = None  # "API server unreachable: ..."

    @property
    def reachable(self) -> bool:
        return self.error is None


def _time(raw: object) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_node(obj: Mapping[str, Any]) -> KubeNode:
    """A Node object (the API's JSON) as shoal reads it."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    ready: Mapping[str, Any] = next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
        {},
    )
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in spec.get("taints") or []
    )
    return KubeNode(
        name=str(meta.get("name", "")),
        ready=str(ready.get("status", "")),
        reason=str(ready.get("reason") or ""),
        message=str(ready.get("message") or "")[:MESSAGE_MAX],
        since=_time(ready.get("lastTransitionTime")),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    """A Pod object (the API's JSON) as a drain reads it."""
    meta = obj.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    owner: Mapping[str, Any] = next((o for o in owners if o.get("controller")), {})
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        owner_kind=str(owner.get("kind", "")),
        mirror="kubernetes.io/config.mirror" in (meta.get("annotations") or {}),
        phase=str((obj.get("status") or {}).get("phase", "")),
        deleting=bool(meta.get("deletionTimestamp")),
    )


# -- readiness ---------------------------------------------------------------------


def _ago(seconds: float) -> str:
    return f"{max(0, int(seconds))} s"


def unready(
    node: KubeNode | None,
    view_reachable: bool,
    now: datetime,
    timeout_s: float,
    ready_at: datetime | None,
    startup_timeout_s: float,
) -> tuple[str | None, datetime | None]:
    """Why Kubernetes makes a ready machine's node unhealthy (None: it does not), and
    when to look again (None: no deadline is running). `node` is its Node object
    (None: not registered); `ready_at` when its machine became ready."""
    if not view_reachable:
        return None, None
    if node is None:
        if ready_at is None:
            return None, None
        deadline = ready_at + timedelta(seconds=startup_timeout_s)
        if now >= deadline:
            return (
                f"it never registered with the Kubernetes API server in the "
                f"{_ago(startup_timeout_s)} after it was ready (check its kubelet)",
                None,
            )
        return None, deadline
    if node.ready in ("True", ""):
        return None, None
    since = min(node.since or now, now)
    deadline = since + timedelta(seconds=timeout_s)
    if now < deadline:
        return None, deadline
    state = "NotReady" if node.ready == "False" else "Ready=Unknown"
    said = ": ".join(x for x in (node.reason, node.message) if x)
    when = since.astimezone(UTC) if since.tzinfo is not None else since
    return (
        f"Kubernetes reports it {state} since {when:%H:%M:%S} UTC" + (f" ({said})" if said else ""),
        None,
    )


# -- labels and taints ---------------------------------------------------------------


def valid_label(key: str, value: str) -> bool:
    """Whether Kubernetes takes label `key`=`value` (its syntax rules)."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return False
    return value == "" or (len(value) <= 63 and bool(_LABEL_NAME.match(value)))


def split_labels(labels: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the labels Kubernetes takes, the keys it would refuse)."""
    good = {k: v for k, v in labels.items() if valid_label(k, v)}
    return good, sorted(k for k in labels if k not in good)


def _keys(note: str | None) -> set[str]:
    return {k for k in (note or "").split(",") if k}


def _taint_key(t: Taint) -> str:
    return f"{t.key}:{t.effect}"


def wanted_patch(
    node: KubeNode, labels: Mapping[str, str], taints: Sequence[Taint], group_uuid: str
) -> dict[str, Any] | None:
    """The merge patch that brings `node` to the group's labels (valid ones) and taints
    (None: it has them). Labels and taints shoal set before and the group no longer
    has are removed; others' are kept."""
    want, _ = split_labels(labels)
    want[GROUP_LABEL] = group_uuid
    before = _keys(node.annotations.get(LABELS_NOTE))
    label_patch: dict[str, str | None] = {k: v for k, v in want.items() if node.labels.get(k) != v}
    for k in before - want.keys():
        if k in node.labels:
            label_patch[k] = None
    meta: dict[str, Any] = {}
    if label_patch:
        meta["labels"] = label_patch
    labels_note = ",".join(sorted(want))
    wanted_taints = {_taint_key(t): t for t in taints}
    taints_note = ",".join(sorted(wanted_taints))
    notes = {}
    if node.annotations.get(LABELS_NOTE, "") != labels_note:
        notes[LABELS_NOTE] = labels_note
    if node.annotations.get(TAINTS_NOTE, "") != taints_note:
        notes[TAINTS_NOTE] = taints_note
    if notes:
        meta["annotations"] = notes
    before_taints = _keys(node.annotations.get(TAINTS_NOTE))
    kept = [
        t
        for t in node.taints
        if _taint_key(t) not in wanted_taints and _taint_key(t) not in before_taints
    ]
    new_taints = kept + list(wanted_taints.values())
    patch: dict[str, Any] = {}
    if set(new_taints) != set(node.taints):
        patch["spec"] = {"taints": [t.as_dict() for t in new_taints]}
        # The whole list is replaced: only if nobody changed the Node since it was read.
        if node.resource_version:
            meta["resourceVersion"] = node.resource_version
    if meta:
        patch["metadata"] = meta
    return patch or None


CORDON: dict[str, Any] = {"spec": {"unschedulable": True}}


# -- drain ---------------------------------------------------------------------------


class Drain(enum.Enum):
    """What to do about a node that is to go."""

    SKIP = "skip"  # nothing to drain (no Node object): go on
    START = "start"  # cordon, evict, look again
    WAIT = "wait"  # evict what is left, look again
    DONE = "done"  # no pod left: go on
    GIVE_UP = "give up"  # the drain timeout passed: go on, and say what was left
    NO_WAIT = "no wait"  # Kubernetes does not report it Ready: evict, go on at once


def evictable(pods: Iterable[Pod]) -> list[Pod]:
    """The pods a drain waits for: not a DaemonSet's (it would come back), not a
    static pod's mirror, not finished."""
    return [
        p
        for p in pods
        if p.owner_kind != "DaemonSet" and not p.mirror and p.phase not in ("Succeeded", "Failed")
    ]


def to_evict(pods: Iterable[Pod]) -> list[Pod]:
    """The pods to ask an eviction for: evictable and not already terminating."""
    return [p for p in evictable(pods) if not p.deleting]


def drain_step(
    view: ClusterView | None,
    name: str,
    started: datetime | None,
    now: datetime,
    timeout_s: float,
) -> Drain:
    """The next step of draining node `name` (`started`: when its drain began, None
    not yet), given this pass's read of the API server (None: the cluster's API is
    not read, nothing to drain)."""
    if view is None:
        return Drain.SKIP
    if view.reachable:
        node = view.nodes.get(name)
        if node is None:
            return Drain.SKIP
        if node.ready != "True":
            return Drain.NO_WAIT
    if started is None:
        return Drain.START
    if now - started >= timedelta(seconds=timeout_s):
        return Drain.GIVE_UP
    pods = view.pods.get(name)
    if view.reachable and pods is not None and not evictable(pods):
        return Drain.DONE
    return Drain.WAIT


def left_over(view: ClusterView | None, name: str) -> str:
    """What a drain that gave up left behind, for an event."""
    if view is None:
        return "nothing known"
    if not view.reachable:
        return str(view.error)
    pods = evictable(view.pods.get(name, ()))
    if not pods:
        return "no pod left"
    refs = ", ".join(p.ref for p in pods[:10]) + (" ..." if len(pods) > 10 else "")
    return f"{len(pods)} pod(s) still there: {refs}"


# -- the calls a pass makes ----------------------------------------------------------

PATCH_OP, CORDON_OP, EVICT_OP, DELETE_OP = "patch", "cordon", "evict", "delete"


@dataclass(frozen=True)
class Op:
    """One call to a cluster's API server a pass makes after its decisions: patch a
    Node (`patch`), cordon it, evict its pods, or delete it."""

    kind: str
    node: str
    patch: Mapping[str, Any] | None = None
