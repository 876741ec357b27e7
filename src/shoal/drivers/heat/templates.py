"""The node group stack's templates: the built-in one, and the operator's checked against
the contract every group template keeps.

A group stack is a `kube_minions` ResourceGroup (Magnum's name, which the Kubernetes
cluster-autoscaler and magnum-auto-healer look for) of `Shoal::Member`, the member
template below: one OS::Nova::Server whose every property comes from its own entry
of the stack's `members` parameter (a map of member index to entry), so that each
member has its own name, zone and bootstrap data. The stack's `refs_map` output maps
member index to Nova server id.

The contract of a group template (built-in or the operator's):
parameters `count` (number), `members` (json), `removal_policies` (json, the members
to remove, by index); output `refs_map`. It may use `Shoal::Member`, which shoal
always passes beside it. Pure: no I/O but reading the operator's file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MEMBER_TYPE = "Shoal::Member"
MEMBER_FILE = "shoal-member.yaml"
GROUP_RESOURCE = "kube_minions"
REQUIRED_PARAMETERS = ("count", "members", "removal_policies")
REQUIRED_OUTPUTS = ("refs_map",)
VERSION = "2018-08-31"


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML as Heat reads it: `heat_template_version: 2018-08-31` stays a string."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_str)


class TemplateError(ValueError):
    """A template shoal cannot use; the message names what is wrong."""


def _field(name: str) -> dict[str, Any]:
    return {"get_param": ["members", {"get_param": "index"}, name]}


MEMBER: dict[str, Any] = {
    "heat_template_version": VERSION,
    "description": "one member of a shoal node group (its entry of the group's members)",
    "parameters": {
        "index": {"type": "string"},
        "members": {"type": "json"},
    },
    "resources": {
        "server": {
            "type": "OS::Nova::Server",
            "properties": {
                "name": _field("name"),
                "image": _field("image"),
                "flavor": _field("flavor"),
                "availability_zone": _field("zone"),
                "key_name": _field("key_name"),
                "metadata": _field("metadata"),
                "tags": _field("tags"),
                "networks": _field("networks"),
                "user_data_format": "RAW",
                "user_data": _field("user_data"),
            },
        }
    },
    "outputs": {
        # A member's reference (refs_map's values) is its server's id.
        "OS::stack_id": {"value": {"get_resource": "server"}},
        "address": {"value": {"get_attr": ["server", "first_address"]}},
        "name": {"value": {"get_attr": ["server", "name"]}},
    },
}

GROUP: dict[str, Any] = {
    "heat_template_version": VERSION,
    "description": "a shoal node group: one ResourceGroup of servers, removal by index",
    "parameters": {
        "count": {"type": "number", "description": "how many members"},
        "members": {"type": "json", "description": "member index -> its entry"},
        "removal_policies": {"type": "json", "default": [], "description": "indices removed"},
    },
    "resources": {
        GROUP_RESOURCE: {
            "type": "OS::Heat::ResourceGroup",
            "properties": {
                "count": {"get_param": "count"},
                "removal_policies": {"get_param": "removal_policies"},
                "resource_def": {
                    "type": MEMBER_TYPE,
                    "properties": {"index": "%index%", "members": {"get_param": "members"}},
                },
            },
        }
    },
    "outputs": {
        "refs_map": {"value": {"get_attr": [GROUP_RESOURCE, "refs_map"]}},
        "addresses": {"value": {"get_attr": [GROUP_RESOURCE, "address"]}},
    },
}


def member_file() -> str:
    return str(yaml.safe_dump(MEMBER, sort_keys=False))


def check(template: Any) -> dict[str, Any]:
    """`template` if it keeps the group template contract, else TemplateError naming each
    missing parameter or output."""
    if not isinstance(template, dict) or "heat_template_version" not in template:
        raise TemplateError("not a Heat (HOT) template: no heat_template_version")
    params = template.get("parameters") or {}
    outputs = template.get("outputs") or {}
    if not isinstance(params, dict) or not isinstance(outputs, dict):
        raise TemplateError("its parameters and outputs must be maps")
    missing = [f"parameter {p!r}" for p in REQUIRED_PARAMETERS if p not in params]
    missing += [f"output {o!r}" for o in REQUIRED_OUTPUTS if o not in outputs]
    if missing:
        raise TemplateError(
            "it lacks " + ", ".join(missing) + " (a node group template must declare the "
            f"parameters {', '.join(REQUIRED_PARAMETERS)} and the outputs "
            f"{', '.join(REQUIRED_OUTPUTS)}: see docs/drivers.md, 'The heat driver')"
        )
    return template


def load_operator(path: str) -> dict[str, Any]:
    """The operator's template at `path`, checked (TemplateError saying what to fix)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise TemplateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        loaded = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path} is not YAML: {exc}") from exc
    try:
        return check(loaded)
    except TemplateError as exc:
        raise TemplateError(f"{path}: {exc}") from exc
