"""The node group stack's templates: the built-in one, and the operator's checked against
the contract every group template keeps.

A group stack holds `kube_minions` (Magnum's name, which the Kubernetes
cluster-autoscaler and magnum-auto-healer look for): a nested stack of type
`Shoal::Members` whose template shoal writes with each update, one OS::Nova::Server
per member named by its index (as a ResourceGroup names its members), each with its
own name, zone and bootstrap data, and the output `refs_map` (member index to Nova
server id). Not a ResourceGroup of nested member stacks: Heat updates every nested
stack whenever its parent changes, so growth would touch every member
(docs/benchmarks.md has the figures).

The contract of a group template (built-in or the operator's): parameters `count`
(number), `members` (json: member index -> entry, shoal's record of who is which
index) and `removal_policies` (json: every index removed, never given out again);
output `refs_map`. It uses `Shoal::Members`, which shoal always passes beside it.
An operator may name several templates (settings `templates`: name -> path); a
group chooses one by its provider option `template` (or the label `heat_template`,
which a cluster template's labels carry to its groups: domain/provider_options.py);
`default` is the provider's `template`, else the built-in one. The stack records the
name it was made from in its tag `shoal-template`, and keeps it: a group's template
does not change after its stack is made.

Pure: no I/O but reading the operator's file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

MEMBERS_TYPE = "Shoal::Members"
MEMBERS_FILE = "shoal-members.yaml"
GROUP_RESOURCE = "kube_minions"
REQUIRED_PARAMETERS = ("count", "members", "removal_policies")
REQUIRED_OUTPUTS = ("refs_map",)
# Passed when a group template declares it: the Nova server group id its new members
# join (from the cluster stack, cluster_stack.py); shoal's own members template puts
# it in each member's scheduler_hints whether the template declares it or not.
OPTIONAL_PARAMETERS = ("server_group",)
VERSION = "2018-08-31"
# Choosing a group's template: the provider option, the label that sets it, the name
# of the provider's own template, how the names look, and the stack tag recording it.
OPTION = "template"
LABEL = "heat_template"
DEFAULT = "default"
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
TAG = "shoal-template"


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML as Heat reads it: `heat_template_version: 2018-08-31` stays a string."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_str)


class TemplateError(ValueError):
    """A template shoal cannot use; the message names what is wrong."""


def members_file(members: Mapping[str, Mapping[str, Any]]) -> str:
    """`Shoal::Members`: the group's servers, one `OS::Nova::Server` per member named by its
    index, each with its own entry's values, and the output `refs_map` (index -> server
    id). shoal writes it anew with each update; Heat leaves a server whose
    definition did not change alone, makes the new ones and deletes the dropped ones."""
    resources: dict[str, Any] = {}
    for index, e in sorted(members.items(), key=lambda kv: int(kv[0])):
        props: dict[str, Any] = {
            "name": e["name"],
            # By id when the entry has it: Heat checks each server's image and flavor on
            # every update of the group (twice: the group stack, then its nested one),
            # and a flavor by name costs it three Nova requests where an id costs one.
            "image": e.get("image_id") or e["image"],
            "flavor": e.get("flavor_id") or e["flavor"],
            "metadata": dict(e.get("metadata") or {}),
            "tags": list(e.get("tags") or []),
            "networks": list(e.get("networks") or []),
            "user_data_format": "RAW",
            "user_data": e.get("user_data") or "",
        }
        if e.get("zone"):
            props["availability_zone"] = e["zone"]
        if e.get("key_name"):
            props["key_name"] = e["key_name"]
        if e.get("server_group"):  # its placement group's, from the cluster stack
            props["scheduler_hints"] = {"group": e["server_group"]}
        resources[index] = {"type": "OS::Nova::Server", "properties": props}
    body = {
        "heat_template_version": VERSION,
        "description": "the servers of a shoal node group, one per member (by index)",
        "resources": resources,
        "outputs": {
            # No output naming a server's attribute (its addresses, say): Heat would
            # resolve it with a Nova call per member at each traversal. shoal reads the
            # members' addresses from Nova's listing.
            "refs_map": {"value": {i: {"get_resource": i} for i in resources}},
        },
    }
    return str(yaml.safe_dump(body, sort_keys=False))


GROUP: dict[str, Any] = {
    "heat_template_version": VERSION,
    "description": "a shoal node group: its servers in one nested stack, kube_minions",
    "parameters": {
        "count": {"type": "number", "description": "how many members"},
        "members": {"type": "json", "description": "member index -> its entry"},
        "removal_policies": {"type": "json", "default": [], "description": "indices removed"},
        "server_group": {
            "type": "string",
            "default": "",
            "description": "the Nova server group the members join ('' none)",
        },
    },
    "resources": {GROUP_RESOURCE: {"type": MEMBERS_TYPE}},
    "outputs": {"refs_map": {"value": {"get_attr": [GROUP_RESOURCE, "refs_map"]}}},
}


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


def name_problem(name: str) -> str | None:
    """Why `name` cannot name an operator's template (None: it can)."""
    if name == DEFAULT:
        return f"{DEFAULT!r} is the provider's own template (setting `template`): name it otherwise"
    if not NAME.match(name):
        return (
            f"{name!r} is not a template name (lowercase letters, digits, '-' and '_', "
            "starting with a letter or digit, at most 40)"
        )
    return None


def chosen(options: Mapping[str, str]) -> str:
    """The template a group's options choose: its option `template`, else the default."""
    return options.get(OPTION) or DEFAULT


def unknown(name: str, known: Sequence[str]) -> str | None:
    """Why a group cannot use template `name` when the provider has `known` (None: it can)."""
    if name in known:
        return None
    return (
        f"template {name!r} is not one of this provider's templates ({', '.join(known)}); "
        "an operator names them in the provider's settings `templates`"
    )


def made_from(tags: Sequence[str] | str | None) -> str:
    """The template a stack was made from, by its tag (a stack made before templates had
    names: the default)."""
    listed = tags.split(",") if isinstance(tags, str) else list(tags or [])
    prefix = f"{TAG}="
    for tag in listed:
        if tag.startswith(prefix):
            return tag[len(prefix) :]
    return DEFAULT
