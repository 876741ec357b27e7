"""Request bodies and status lists of real Magnum clients, written down from their
sources (what each sends, not their code), for tests/integration/test_client_replay.py.

- gophercloud (containerinfra v1), under Terraform's openstack provider and the
  cluster autoscaler: JSON from Go structs. A `*int` without `omitempty`
  (`create_timeout`) is sent as null when unset; `*bool` / `*int` with `omitempty`
  are left out when nil; strings with `omitempty` are left out when empty. No
  microversion header unless the resource sets one (node groups: 1.9; a cluster
  with node_count 0: 1.10).
- Terraform's resources PATCH a template with every value as a string
  (`strconv.Itoa`, `strconv.FormatBool`), its labels as one string (`k=v,k2=v2`
  in the provider's versions; `str(dict)` from Python clients), an empty value as
  a `remove`; a cluster's node_count as a string; a node group's counts as numbers.
  They wait with pending/target lists (`TERRAFORM_WAITS`): any other status fails
  the apply, and a 404 while waiting reads as DELETE_COMPLETE.
- magnum-ui (Horizon) turns every create value into a string (`str(value)`, None
  into ""), keeps labels a dict, and sends the zone as the label
  `availability_zone`; it talks through python-magnumclient at the microversion
  the deployment configures (1.13 here).
"""

from __future__ import annotations

from typing import Any

KUBE_TAG = "v1.20.2"

# (pending, target) per step, as the provider's StateChangeConf lists them.
TERRAFORM_WAITS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "create": (("CREATE_IN_PROGRESS",), ("CREATE_COMPLETE",)),
    "update": (("UPDATE_IN_PROGRESS",), ("UPDATE_COMPLETE",)),
    "delete": (("DELETE_IN_PROGRESS",), ("DELETE_COMPLETE",)),
}
# Statuses the provider's refresh function turns into an error at once.
TERRAFORM_ERRORS = (
    "CREATE_FAILED",
    "UPDATE_FAILED",
    "DELETE_FAILED",
    "RESUME_FAILED",
    "ROLLBACK_FAILED",
)
NODEGROUP_MICROVERSION = "1.9"  # the provider's containerInfraV1NodeGroupMinMicroversion


def terraform_template_create(name: str) -> dict[str, Any]:
    """openstack_containerinfra_clustertemplate_v1 create: booleans always sent (the
    resource passes pointers to false), optional strings and ints left out."""
    return {
        "coe": "kubernetes",
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "master_flavor_id": "m1.small",
        "name": name,
        "network_driver": "flannel",
        "docker_storage_driver": "overlay2",
        "docker_volume_size": 10,
        "dns_nameserver": "8.8.8.8",
        "labels": {"kube_tag": KUBE_TAG, "cloud_provider_enabled": "true"},
        "floating_ip_enabled": False,
        "master_lb_enabled": False,
        "public": False,
        "registry_enabled": False,
        "tls_disabled": False,
        "hidden": False,
    }


def terraform_template_update(labels: str) -> list[dict[str, Any]]:
    """The resource's update after `labels`, `master_lb_enabled`, `docker_volume_size`
    and `dns_nameserver` (emptied) changed: strings only, an empty value removed."""
    return [
        {"op": "replace", "path": "/docker_volume_size", "value": "20"},
        {"op": "remove", "path": "/dns_nameserver"},
        {"op": "replace", "path": "/labels", "value": labels},
        {"op": "replace", "path": "/master_lb_enabled", "value": "true"},
        {"op": "replace", "path": "/tls_disabled", "value": "false"},
    ]


def gophercloud_cluster_create(name: str, template: str, node_count: int) -> dict[str, Any]:
    """clusters.CreateOpts as Terraform fills it with no create_timeout, keypair,
    flavors or labels set: `create_timeout` null, `floating_ip_enabled` a pointer."""
    return {
        "cluster_template_id": template,
        "create_timeout": None,
        "floating_ip_enabled": False,
        "master_count": 1,
        "name": name,
        "node_count": node_count,
    }


def gophercloud_nodegroup_create(name: str) -> dict[str, Any]:
    """nodegroups.CreateOpts from openstack_containerinfra_nodegroup_v1 (min 0: omitted)."""
    return {"name": name, "node_count": 1, "max_node_count": 3, "flavor_id": "m1.small"}


def magnum_ui_template_create(name: str) -> dict[str, str | dict[str, str]]:
    """The template form after `_cleanup_params`: every value a string, None as ""."""
    return {
        "name": name,
        "coe": "kubernetes",
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "master_flavor_id": "m1.small",
        "keypair_id": "",
        "external_network_id": "public",
        "fixed_network": "",
        "fixed_subnet": "",
        "dns_nameserver": "8.8.8.8",
        "docker_volume_size": "10",
        "docker_storage_driver": "",
        "labels": {"kube_tag": KUBE_TAG},
        "http_proxy": "",
        "https_proxy": "",
        "no_proxy": "",
        "network_driver": "",
        "volume_driver": "",
        "server_type": "vm",
        "tls_disabled": "False",
        "public": "False",
        "hidden": "False",
        "registry_enabled": "False",
        "master_lb_enabled": "False",
        "floating_ip_enabled": "True",
    }


def magnum_ui_cluster_create(name: str, template: str, zone: str) -> dict[str, Any]:
    """The cluster wizard after `_cleanup_params`: counts and flags as strings, the
    zone and the add-ons as labels, the empty fields as ""."""
    return {
        "name": name,
        "cluster_template_id": template,
        "keypair": "",
        "master_count": "1",
        "node_count": "2",
        "master_flavor_id": "m1.small",
        "flavor_id": "m1.small",
        "create_timeout": "",
        "discovery_url": "",
        "docker_volume_size": "",
        "fixed_network": "",
        "fixed_subnet": "",
        "floating_ip_enabled": "False",
        "master_lb_enabled": "False",
        "merge_labels": "True",
        "labels": {
            "availability_zone": zone,
            "auto_healing_enabled": "true",
            "auto_scaling_enabled": "false",
        },
    }
