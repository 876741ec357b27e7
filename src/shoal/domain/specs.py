"""Attribute tables: which request keys a resource takes and how each is checked,
and how a dict of node group attributes becomes a `NodeGroupSpec`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from shoal.domain import model as m
from shoal.domain import operations, rollout, virt
from shoal.domain import validation as v
from shoal.domain.errors import Invalid

Check = Callable[[str, Any], Any]

COES = ("kubernetes",)
NETWORK_DRIVERS = ("flannel", "calico", "cilium")
SERVER_TYPES = ("vm", "bm")
HEALTH_STATUSES = ("HEALTHY", "UNHEALTHY", "UNKNOWN")


# Optional scalars as Magnum's types take them: null (gophercloud sends
# `"create_timeout": null` when the user set none) or "" (magnum-ui sends "" for an
# empty field) mean "not given", so the default applies; numbers and booleans may
# come as strings ("3", "True"); anything else is a 400 naming the field.


def _opt_int(lo: int | None = None, hi: int | None = None) -> Check:
    return lambda f, x: None if v.blank(x) else v.integer(f, x, lo, hi)


def _choice(choices: tuple[str, ...], nullable: bool = True) -> Check:
    return lambda f, x: None if v.blank(x) and nullable else v.choice(f, x, choices)


def _bool(f: str, x: Any) -> bool | None:
    return None if v.blank(x) else v.boolean(f, x)


def labels(field: str, value: Any) -> dict[str, str]:
    """Labels; those shoal itself reads are checked (`upgrade_strategy`, `ostree_ref`)."""
    out = v.str_dict(field, value)
    strategy = out.get("upgrade_strategy")
    if strategy is not None and strategy not in rollout.STRATEGIES:
        raise Invalid(
            f"{field}[upgrade_strategy] must be one of: {', '.join(rollout.STRATEGIES)}", field
        )
    if "ostree_ref" in out:
        operations.argument(f"{field}[ostree_ref]", out["ostree_ref"])
    return out


# Magnum attributes a cluster template and a cluster share (stored in `attrs`).
COMMON_ATTRS: dict[str, Check] = {
    "provider": v.string,
    "image_id": v.string,
    "flavor_id": v.string,
    "master_flavor_id": v.string,
    "docker_volume_size": _opt_int(1),
    "labels": labels,
    "fixed_network": v.string,
    "fixed_subnet": v.string,
    "floating_ip_enabled": _bool,
    "master_lb_enabled": _bool,
}

TEMPLATE_ATTRS: dict[str, Check] = {
    **COMMON_ATTRS,
    "coe": _choice(COES, nullable=False),
    "keypair_id": v.string,
    "external_network_id": v.string,
    "dns_nameserver": v.string,
    "network_driver": _choice(NETWORK_DRIVERS),
    "volume_driver": v.string,
    "docker_storage_driver": v.string,
    "server_type": _choice(SERVER_TYPES),
    "tls_disabled": _bool,
    "public": _bool,
    "hidden": _bool,
    "registry_enabled": _bool,
    "http_proxy": v.text,
    "https_proxy": v.text,
    "no_proxy": v.text,
    "insecure_registry": v.string,
    "apiserver_port": _opt_int(1),
    "cluster_distro": v.string,
    "driver": v.string,
    "tags": v.string,
    "coe_version": v.version,
}

CLUSTER_ATTRS: dict[str, Check] = {
    **COMMON_ATTRS,
    "coe": _choice(COES, nullable=False),
    "keypair": v.string,
    "create_timeout": _opt_int(0, 7 * 24 * 60),
    "discovery_url": v.text,
    "merge_labels": _bool,
    "coe_version": v.version,
    "master_count": _opt_int(1),
    "node_count": _opt_int(0),
}

# Template attributes a cluster copies (everything but presentation flags).
TEMPLATE_TO_CLUSTER_SKIP = frozenset({"public", "hidden", "tags"})

NODEGROUP_KEYS = frozenset(
    {
        "role",
        "flavor_id",
        "image_id",
        "docker_volume_size",
        "availability_zones",
        "labels",
        "node_labels",
        "node_taints",
        "node_count",
        "min_node_count",
        "max_node_count",
        "deletion_policy",
        "rollout",
        "health_policy",
        "merge_labels",
        "coe_version",
        "vms",
        "vm_template",
        "provider",
        "networks",
        "security_groups",
        "placement_policy",
        "boot_volume_size",
        "provider_options",
    }
)
PLACEMENT_POLICIES = ("anti-affinity", "soft-anti-affinity", "affinity", "soft-affinity", "none")

DELETION_POLICIES = tuple(str(p) for p in m.DeletionPolicy)


def check_attrs(kind: str, body: Mapping[str, Any], table: Mapping[str, Check]) -> dict[str, Any]:
    """Validate the keys of `body` found in `table`; return them checked (others untouched)."""
    return {k: table[k](k, x) for k, x in body.items() if k in table}


def apply_ng_attrs(base: m.NodeGroupSpec, attrs: Mapping[str, Any]) -> m.NodeGroupSpec:
    """A new spec: `base` with the given node group attributes, each checked."""
    changes: dict[str, Any] = {}
    for key, raw in attrs.items():
        if key == "role":
            changes["role"] = v.name("role", raw, 64)
        elif key in ("flavor_id", "image_id"):
            changes[key] = v.string(key, raw)
        elif key == "coe_version":
            changes[key] = v.version(key, raw)
        elif key == "docker_volume_size":
            changes[key] = v.opt_integer(key, raw, lo=1)
        elif key == "availability_zones":
            changes[key] = v.str_list(key, raw)
        elif key == "labels":
            changes[key] = labels(key, raw)
        elif key == "node_labels":
            changes[key] = v.str_dict(key, raw)
        elif key == "node_taints":
            changes[key] = v.taints(key, raw)
        elif key in ("node_count", "min_node_count"):
            changes[key] = v.integer(key, raw, lo=0)
        elif key == "max_node_count":
            changes[key] = v.opt_integer(key, raw, lo=0)
        elif key == "deletion_policy":
            changes[key] = m.DeletionPolicy(v.choice(key, raw, DELETION_POLICIES))
        elif key == "rollout":
            changes[key] = v.rollout(key, raw)
        elif key == "health_policy":
            changes["health"] = v.health(key, raw)
        elif key == "merge_labels":
            changes[key] = v.boolean(key, raw)
        elif key == "vms":
            changes[key] = v.vms(key, raw)
            virt.check_entries(key, changes[key])
        elif key == "vm_template":
            changes[key] = virt.template_text(key, raw)
        elif key == "provider":
            changes[key] = v.string(key, raw)
        elif key in ("networks", "security_groups"):
            changes[key] = v.str_list(key, raw)
        elif key == "placement_policy":
            changes[key] = None if raw is None else v.choice(key, raw, PLACEMENT_POLICIES)
        elif key == "boot_volume_size":
            changes[key] = v.opt_integer(key, raw, lo=1)
        elif key == "provider_options":
            changes[key] = v.str_dict(key, raw)
    spec = dataclasses.replace(base, **changes)
    if changes.keys() & {"role", "vms", "vm_template"}:
        virt.check_spec(spec)
    return spec


def spec_as_attrs(spec: m.NodeGroupSpec) -> dict[str, Any]:
    """The wire form of a spec (NGT objects, clones)."""
    return {
        "role": spec.role,
        "flavor_id": spec.flavor_id,
        "image_id": spec.image_id,
        "docker_volume_size": spec.docker_volume_size,
        "availability_zones": list(spec.availability_zones),
        "labels": dict(spec.labels),
        "node_labels": dict(spec.node_labels),
        "node_taints": [t.as_dict() for t in spec.node_taints],
        "node_count": spec.node_count,
        "min_node_count": spec.min_node_count,
        "max_node_count": spec.max_node_count,
        "deletion_policy": str(spec.deletion_policy),
        "rollout": dataclasses.asdict(spec.rollout),
        "health_policy": dataclasses.asdict(spec.health),
        "merge_labels": spec.merge_labels,
        "coe_version": spec.coe_version,
        "provider": spec.provider,
        "networks": list(spec.networks),
        "security_groups": list(spec.security_groups),
        "placement_policy": spec.placement_policy,
        "boot_volume_size": spec.boot_volume_size,
        "provider_options": dict(spec.provider_options),
        "vms": [dict(x) for x in spec.vms],
        "vm_template": spec.vm_template,
    }
