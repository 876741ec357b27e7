"""Creation paths as pure functions: merge a template or a source cluster with the
request (the request wins), and plan the node groups of a new cluster.

A created resource copies everything it needs here; it never refers back to its
source afterwards except by id, for display.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.domain import model as m
from shoal.domain import specs
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid

CLUSTER_ONLY = frozenset({"keypair", "create_timeout", "discovery_url", "merge_labels"})
DEFAULT_CREATE_TIMEOUT = 60
# The name of the template a cluster was made from, kept in its attrs: the read-only
# copy that answers for that template's id once it is deleted is shown under it.
SOURCE_TEMPLATE_NAME = "cluster_template_name"


@dataclass(frozen=True)
class GroupPlan:
    """One node group to create with a cluster."""

    name: str
    spec: m.NodeGroupSpec
    is_default: bool = False
    source_id: str | None = None


def template_to_cluster_attrs(ct_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes a cluster copies from a template (keypair_id becomes keypair)."""
    out = {k: x for k, x in ct_attrs.items() if k not in specs.TEMPLATE_TO_CLUSTER_SKIP}
    if "keypair_id" in out:
        out["keypair"] = out.pop("keypair_id")
    return out


def cluster_to_template_attrs(cluster_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The template attributes made from a cluster (keypair becomes keypair_id)."""
    out = {
        k: x
        for k, x in cluster_attrs.items()
        if k in specs.TEMPLATE_ATTRS and x is not None and not k.startswith("labels_")
    }
    if cluster_attrs.get("keypair") is not None:
        out["keypair_id"] = cluster_attrs["keypair"]
    out.setdefault("coe", "kubernetes")
    return out


def cluster_attrs(base: Mapping[str, Any] | None, request: Mapping[str, Any]) -> dict[str, Any]:
    """Base attributes (from a template or a source cluster) overlaid by the request.

    Labels: the request's replace the base's unless `merge_labels` is true; the
    Magnum display fields labels_added/overridden/skipped record the difference.
    """
    base = dict(base or {})
    for k in ("labels_added", "labels_overridden", "labels_skipped"):
        base.pop(k, None)
    req = {k: x for k, x in request.items() if k not in ("master_count", "node_count")}
    out = {**base, **req}
    out.setdefault("coe", "kubernetes")
    out.setdefault("create_timeout", DEFAULT_CREATE_TIMEOUT)
    out.setdefault("flavor_id", v.DEFAULT_FLAVOR)
    out.setdefault("master_flavor_id", out["flavor_id"])
    base_labels: dict[str, str] = dict(base.get("labels") or {})
    if "labels" in req and base_labels:
        req_labels: dict[str, str] = dict(req["labels"] or {})
        merge = bool(out.get("merge_labels"))
        out["labels"] = {**base_labels, **req_labels} if merge else req_labels
        out["labels_added"] = {k: x for k, x in req_labels.items() if k not in base_labels}
        out["labels_overridden"] = {
            k: base_labels[k]
            for k, x in req_labels.items()
            if k in base_labels and base_labels[k] != x
        }
        out["labels_skipped"] = (
            {} if merge else {k: x for k, x in base_labels.items() if k not in req_labels}
        )
    return out


def default_groups(attrs: Mapping[str, Any]) -> list[GroupPlan]:
    """Magnum's `default-master` and `default-worker` (counts applied later)."""
    master = m.NodeGroupSpec(role=m.ROLE_MASTER, flavor_id=attrs.get("master_flavor_id"))
    worker = m.NodeGroupSpec(role=m.ROLE_WORKER, flavor_id=attrs.get("flavor_id"))
    return [
        GroupPlan(m.DEFAULT_MASTER_GROUP, master, is_default=True),
        GroupPlan(m.DEFAULT_WORKER_GROUP, worker, is_default=True),
    ]


def mark_defaults(plans: Sequence[GroupPlan]) -> list[GroupPlan]:
    """The first master group and the first non-master group become the defaults."""
    out: list[GroupPlan] = []
    seen_master = seen_worker = False
    for p in plans:
        is_master = p.spec.role == m.ROLE_MASTER
        default = (is_master and not seen_master) or (not is_master and not seen_worker)
        seen_master = seen_master or is_master
        seen_worker = seen_worker or not is_master
        out.append(dataclasses.replace(p, is_default=default))
    return out


def apply_counts(plans: Sequence[GroupPlan], request: Mapping[str, Any]) -> list[GroupPlan]:
    """Request master_count / node_count set the default master / worker counts."""
    out = []
    for p in plans:
        spec = p.spec
        if p.is_default:
            key = "master_count" if spec.role == m.ROLE_MASTER else "node_count"
            if key in request:
                count = v.integer(key, request[key], lo=0)
                spec = dataclasses.replace(spec, node_count=count)
        out.append(dataclasses.replace(p, spec=spec))
    return out


def image_and_flavor(spec: m.NodeGroupSpec, attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The one fallback chain for what a group's machines run: the group's own image
    and flavor, else the cluster's (`master_flavor_id` for a master group, then
    `flavor_id`), else the default flavor. "" when no image is known."""
    master = attrs.get("master_flavor_id") if spec.role == m.ROLE_MASTER else None
    flavor = spec.flavor_id or master or attrs.get("flavor_id") or v.DEFAULT_FLAVOR
    return str(spec.image_id or attrs.get("image_id") or ""), str(flavor)


def provider_of(spec: m.NodeGroupSpec, attrs: Mapping[str, Any], known: m.ProviderNames) -> str:
    """The provider a new node group's machines live in: the group's own `provider`,
    else its label `provider`, else the cluster's attribute, else the cluster's
    label (Magnum clients can send only labels), else the deployment's default.
    Invalid when that provider is not configured."""
    labels = dict(attrs.get("labels") or {})
    name = (
        spec.provider
        or spec.labels.get("provider")
        or attrs.get("provider")
        or labels.get("provider")
        or known.default
    )
    check_provider(str(name), known)
    return str(name)


def check_provider(name: str | None, known: m.ProviderNames, field: str = "provider") -> None:
    """Invalid when `name` is given and names no configured provider."""
    if name is not None and name not in known.names:
        raise Invalid(
            f"provider {name!r} is not configured (providers: {', '.join(known.names)})", field
        )


def volumes(spec: m.NodeGroupSpec, attrs: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """A group's machines' (docker volume, boot volume) in GB: the group's own, else
    the cluster's docker volume and the label `boot_volume_size` (Magnum's)."""
    docker = spec.docker_volume_size or attrs.get("docker_volume_size")
    raw = spec.labels.get("boot_volume_size", "")
    label = int(raw) if raw.isdigit() and int(raw) > 0 else None
    return docker, spec.boot_volume_size or label


def fill_from_cluster(plan: GroupPlan, attrs: Mapping[str, Any]) -> GroupPlan:
    """Fill what a group leaves open from the cluster: image, flavor, volume, labels."""
    spec = plan.spec
    image, flavor = image_and_flavor(spec, attrs)
    spec = dataclasses.replace(
        spec,
        image_id=image or None,
        flavor_id=flavor,
        docker_volume_size=spec.docker_volume_size or attrs.get("docker_volume_size"),
        labels=spec.labels or dict(attrs.get("labels") or {}),
        coe_version=spec.coe_version or attrs.get("coe_version"),
    )
    return dataclasses.replace(plan, spec=spec)


def plan_groups(
    attrs: Mapping[str, Any],
    request: Mapping[str, Any],
    source: Sequence[GroupPlan] = (),
    *,
    allow_zero: bool = True,
    providers: m.ProviderNames = m.ProviderNames(),
    limits: v.Limits | None = None,
) -> list[GroupPlan]:
    """The node groups of a new cluster, checked: `source` (the groups its template,
    clone and request entries make: entries.cluster_groups), else the two default
    groups; the first master and first other group are the defaults, whose counts
    the request's master_count / node_count set; each with its provider resolved
    (`provider_of`)."""
    plans = list(source) or default_groups(attrs)
    plans = apply_counts(mark_defaults(plans), request)
    plans = [with_provider(fill_from_cluster(p, attrs), attrs, providers) for p in plans]
    check_groups(plans, allow_zero=allow_zero, limits=limits or v.Limits())
    return plans


def with_provider(plan: GroupPlan, attrs: Mapping[str, Any], known: m.ProviderNames) -> GroupPlan:
    """`plan` with its provider resolved and checked (`provider_of`)."""
    spec = dataclasses.replace(plan.spec, provider=provider_of(plan.spec, attrs, known))
    return dataclasses.replace(plan, spec=spec)


def check_groups(
    plans: Sequence[GroupPlan], *, allow_zero: bool = True, limits: v.Limits | None = None
) -> None:
    """Node counts within the operator's limits, unique names, valid counts, an image
    for each, and at least one master."""
    limits = limits or v.Limits()
    for p in plans:
        v.spec_nodes(p.spec, limits, prefix=f"node group {p.name}: ")
    v.cluster_nodes(sum(p.spec.node_count for p in plans), limits)
    names = [p.name for p in plans]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise Conflict(f"A node group with name {dupes[0]} already exists in the cluster")
    for p in plans:
        v.counts(p.spec, allow_zero=allow_zero)
        if not p.spec.image_id:
            raise Invalid(f"image_id is required (node group {p.name} has none)", "image_id")
    v.master_total(sum(p.spec.node_count for p in plans if p.spec.role == m.ROLE_MASTER))


def groups_from_cluster(groups: Sequence[m.NodeGroup]) -> list[GroupPlan]:
    """A source cluster's node groups as plans (clone: same names, specs and counts)."""
    live = [g for g in groups if not g.deleting]
    return [
        GroupPlan(g.name, dataclasses.replace(g.spec, rollout_hold=None), source_id=g.uuid)
        for g in live
    ]


def ngt_spec(
    base: m.NodeGroupSpec, request: Mapping[str, Any], limits: v.Limits | None = None
) -> m.NodeGroupSpec:
    """A node group template spec: `base` (default, or a node group's) plus overrides,
    its counts within the per-group limit (a template no cluster may use is refused
    when it is written, not when it is used)."""
    spec = specs.apply_ng_attrs(base, request)
    v.spec_nodes(spec, limits or v.Limits())
    v.counts(spec)
    return spec
