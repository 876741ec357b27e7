"""JSON schemas of the request bodies, for the OpenAPI document.

The routes read bodies as plain JSON and the services check them (domain
validation is the rule; these schemas describe it). A route names its body
with `body("ClusterCreate")`; `components(limits)` builds the schemas with the
operator's node limits, so the document states the bounds this server applies.
Canonical JSON forms only: the API also takes what Magnum's clients send
(integers and booleans as strings, labels as a Python-literal string).
"""

from __future__ import annotations

from typing import Any

from shoal.domain import jsonpatch, model, operations, policy, specs, virt
from shoal.domain import validation as v

Schema = dict[str, Any]
REF = "#/components/schemas/"


def body(name: str) -> dict[str, Any]:
    """`openapi_extra` for a route whose JSON body is the schema `name`."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": REF + name}}},
        }
    }


def _str(most: int = v.NAME_MAX) -> Schema:
    return {"type": "string", "maxLength": most}


def _int(lo: int = 0, hi: int = v.INT_MAX) -> Schema:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


BOOL: Schema = {"type": "boolean"}
NAME: Schema = {"type": "string", "pattern": v.NAME_RE.pattern, "maxLength": v.NAME_MAX}
# A required id (`validation.required_id`): not empty, not only blanks.
ID: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": v.NAME_MAX,
    "pattern": v.PRESENT_RE.pattern,
}
LABELS: Schema = {
    "type": "object",
    "maxProperties": v.LABELS_MAX,
    "propertyNames": {"minLength": 1, "maxLength": v.LABEL_KEY_MAX},
    "additionalProperties": _str(v.LABEL_VALUE_MAX),
}
TAINT: Schema = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key", "effect"],
    "properties": {
        "key": {"type": "string", "minLength": 1, "maxLength": v.LABEL_KEY_MAX},
        "value": _str(),
        "effect": _enum(*model.TAINT_EFFECTS),
    },
}


# An operation's `params`: the union of what its kinds take (domain/operations.py
# `check` says which kind takes which; another key gets 400).
_WORDS: Schema = {
    "type": "array",
    "maxItems": operations.NAMES_MAX,
    "items": {"type": "string", "minLength": 1, "maxLength": operations.ARGUMENT_MAX},
}
PARAMS: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "services": _WORDS,  # restart-services
        "packages": _WORDS,  # upgrade-packages
        "images": _WORDS,  # upgrade-images
        "ref": {"type": "string", "minLength": 1, "maxLength": operations.ARGUMENT_MAX},
        "image_id": _str(),  # rebuild
        "labels": LABELS,  # set-labels
        "taints": {"type": "array", "maxItems": v.TAINTS_MAX, "items": TAINT},
    },
}


def _policy(*fields: str, hi: dict[str, int] | None = None) -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {f: _int(0, (hi or {}).get(f, v.INT_MAX)) for f in fields},
    }


STRINGS: Schema = {
    "type": "array",
    "maxItems": v.AZS_MAX,
    "items": {"type": "string", "minLength": 1, "maxLength": v.NAME_MAX},
}


def attributes(limits: v.Limits) -> dict[str, Schema]:
    """One schema per attribute name a template, cluster or node group takes."""
    per_group = limits.nodes_per_group
    return {
        # Shared by templates and clusters.
        "image_id": _str(),
        "flavor_id": _str(),
        "master_flavor_id": _str(),
        "docker_volume_size": _int(1),
        "labels": LABELS,
        "fixed_network": _str(),
        "fixed_subnet": _str(),
        "floating_ip_enabled": BOOL,
        "master_lb_enabled": BOOL,
        "coe": _enum(*specs.COES),
        "coe_version": _str(v.VERSION_MAX),
        # Templates.
        "keypair_id": _str(),
        "external_network_id": _str(),
        "dns_nameserver": _str(),
        "network_driver": _enum(*specs.NETWORK_DRIVERS),
        "volume_driver": _str(),
        "docker_storage_driver": _str(),
        "server_type": _enum(*specs.SERVER_TYPES),
        "tls_disabled": BOOL,
        "public": BOOL,
        "hidden": BOOL,
        "registry_enabled": BOOL,
        "http_proxy": _str(v.TEXT_MAX),
        "https_proxy": _str(v.TEXT_MAX),
        "no_proxy": _str(v.TEXT_MAX),
        "insecure_registry": _str(),
        "apiserver_port": _int(1),
        "cluster_distro": _str(),
        "driver": _str(),
        "tags": _str(),
        # Clusters.
        "keypair": _str(),
        "create_timeout": _int(0, 7 * 24 * 60),
        "discovery_url": _str(v.TEXT_MAX),
        "merge_labels": BOOL,
        "master_count": _int(1, per_group),
        "node_count": _int(0, per_group),
        # Node groups.
        "role": {**NAME, "maxLength": 64},
        "availability_zones": {
            "type": "array",
            "maxItems": v.AZS_MAX,
            "uniqueItems": True,
            "items": {"type": "string", "minLength": 1, "maxLength": v.NAME_MAX},
        },
        "node_labels": LABELS,
        "node_taints": {"type": "array", "maxItems": v.TAINTS_MAX, "items": TAINT},
        "min_node_count": _int(0, per_group),
        "max_node_count": _int(0, per_group),
        "deletion_policy": _enum(*specs.DELETION_POLICIES),
        "rollout": _policy("max_surge", "max_unavailable", "progress_deadline_s"),
        "health_policy": _policy(
            "startup_timeout_s",
            "unhealthy_timeout_s",
            "max_unhealthy_percent",
            hi={"max_unhealthy_percent": 100},
        ),
        "vms": {"type": "array", "maxItems": v.VMS_MAX, "items": {"type": "object"}},
        "vm_template": {"type": ["string", "null"], "maxLength": virt.TEMPLATE_MAX},
        # Providers and what a real machine needs (node groups; `provider` also clusters).
        "provider": _str(64),
        "networks": STRINGS,
        "security_groups": STRINGS,
        "placement_policy": _enum(*specs.PLACEMENT_POLICIES),
        "boot_volume_size": _int(1),
        "provider_options": LABELS,
    }


def _object(props: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    out: Schema = {"type": "object", "additionalProperties": False, "properties": props}
    if required:
        out["required"] = list(required)
    return out


def _pick(attrs: dict[str, Schema], keys: Any) -> dict[str, Schema]:
    return {k: attrs[k] for k in sorted(keys)}


def _entry(group: dict[str, Schema], ident: Schema, refs: tuple[str, ...]) -> Schema:
    """A node group entry: `name` + attributes, or one of `refs` naming a source
    (then `name` is optional) + attributes over it; never two refs."""
    out = _object({**group, "name": NAME, **{r: ident for r in refs}})
    out["anyOf"] = [{"required": [k]} for k in ("name", *refs)]
    if len(refs) > 1:
        out["not"] = {"required": list(refs)}
    return out


def components(limits: v.Limits) -> dict[str, Schema]:
    """Every request body schema, by name, with `limits` as the node count bounds."""
    attrs = attributes(limits)
    group = _pick(attrs, specs.NODEGROUP_KEYS)
    ident = _str()
    return {
        "ClusterTemplateCreate": _object(
            {
                **_pick(attrs, specs.TEMPLATE_ATTRS),
                "name": NAME,
                "from_cluster": ident,
                "from_clustertemplate": ident,
                "node_group_templates": {
                    "type": "array",
                    "maxItems": v.NODE_GROUPS_MAX,
                    "items": _entry(group, ident, ("nodegroup_template_id",)),
                },
                "project_id": ident,
                "user_id": ident,
            }
        ),
        "NodeGroupTemplateCreate": _object(
            {
                **group,
                "name": NAME,
                "from_nodegroup": ident,
                "from_nodegrouptemplate": ident,
                "project_id": ident,
            }
        ),
        "ClusterCreate": _object(
            {
                **_pick(attrs, specs.CLUSTER_ATTRS),
                "name": {**NAME, "maxLength": v.CLUSTER_NAME_MAX},
                "cluster_template_id": ident,
                "from_cluster": ident,
                "node_groups": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": v.NODE_GROUPS_MAX,
                    "items": _entry(group, ident, ("nodegroup_template_id", "from_nodegroup")),
                },
                "project_id": ident,
                "user_id": ident,
            }
        ),
        "NodeGroupCreate": _object(
            {
                **group,
                "name": NAME,
                "nodegroup_template_id": ident,
                "from_nodegroup": ident,
                "project_id": ident,
            },
            ("name",),
        ),
        "Resize": _object(
            {
                "node_count": _int(0, limits.nodes_per_group),
                "nodegroup": ident,
                "force": {"type": "boolean"},  # shoal: take down virt hosts carrying VMs
                "nodes_to_remove": {
                    "type": "array",
                    "maxItems": limits.nodes_per_group,
                    "items": _str(v.NODE_REF_MAX),
                },
            },
            ("node_count",),
        ),
        "Upgrade": _object(
            {"cluster_template": ID, "max_batch_size": _int(1), "nodegroup": ident},
            ("cluster_template",),
        ),
        "RolloutHold": _object({"nodegroup": ident}),
        "OperationCreate": _object(
            {
                "kind": _enum(*operations.KINDS),
                "nodegroup": ident,
                "nodes": {
                    "type": "array",
                    "maxItems": limits.nodes_per_group,
                    "items": _str(v.NODE_REF_MAX),
                },
                "batch_size": _int(1, 1000),
                "params": PARAMS,
            },
            ("kind",),
        ),
        "AgentHeartbeat": _object(
            {
                "node": ident,
                "version": _str(),
                "task": {"type": ["string", "null"]},
                # the node's supervised services (shoal.agent.services), when it has any
                "services": {"type": "array", "items": {"type": "object"}},
            }
        ),
        "AgentReport": _object(
            {
                "node": ident,
                "state": _enum("RUNNING", "SUCCEEDED", "FAILED"),
                "output": {"type": "string"},
                "exit_code": {
                    "type": ["integer", "null"],
                    "minimum": -(2**31),
                    "maximum": 2**31 - 1,
                },
            },
            ("state",),
        ),
        "CertificateSign": {
            **_object(
                {
                    "cluster_uuid": ID,
                    "bay_uuid": ID,  # Magnum's old name for cluster_uuid
                    "csr": {"type": "string", "minLength": 1, "maxLength": 64 * 1024},
                    "ca_cert_type": _enum("kubernetes"),
                },
                ("csr",),
            ),
            "anyOf": [{"required": ["cluster_uuid"]}, {"required": ["bay_uuid"]}],
        },
        "QuotaCreate": _object(
            {"project_id": ID, "resource": _enum("Cluster"), "hard_limit": _int()},
            ("project_id", "hard_limit"),
        ),
        "QuotaUpdate": _object({"hard_limit": _int()}, ("hard_limit",)),
        "TokenCreate": _object(
            {
                "project_id": NAME,
                "role": _enum(*policy.ROLES),
                "user_id": NAME,
                "expires": _str(64),
                "description": _str(),
            },
            ("project_id",),
        ),
        "OrphanAdopt": _object(
            {"cluster_id": ID, "name": {**NAME, "maxLength": v.CLUSTER_NAME_MAX}},
            ("cluster_id",),
        ),
        "JsonPatch": {
            "type": "array",
            "maxItems": v.PATCH_OPS_MAX,
            "items": _object(
                {
                    "op": _enum(*jsonpatch.OPS),
                    "path": {"type": "string", "pattern": "^/", "maxLength": 512},
                    "value": {},
                },
                ("op", "path"),
            ),
        },
    }
