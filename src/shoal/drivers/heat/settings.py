"""The heat driver's typed settings: a provider's `settings:` in the config file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from shoal.drivers.heat import templates
from shoal.options import opt


@dataclass(frozen=True)
class HeatSettings:
    """An OpenStack cloud with Heat (driver `heat`): a clouds.yaml entry, in openstacksdk's
    own format and lookup; each node group is one stack there."""

    # Parallel calls to one Heat provider when its `concurrency` is not given: each
    # call is a stack read or update, and one Heat engine serialises much of them.
    PROVIDER_CONCURRENCY: ClassVar[int] = 4

    cloud: str | None = opt(None, "the clouds.yaml entry to use", required=True)
    clouds_yaml: str | None = opt(
        None,
        "path of the clouds.yaml file; default: openstacksdk's lookup (OS_CLIENT_CONFIG_FILE, "
        "./clouds.yaml, ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml)",
    )
    region_name: str | None = opt(None, "the region of the entry to use; default: the entry's")
    deployment: str | None = opt(
        None,
        "a name for this shoal deployment, unique among those sharing the cloud project: "
        "every stack and server carries it as a tag, and shoal lists only what carries it",
        required=True,
        pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
    )
    template: str | None = opt(
        None,
        "path of the operator's node group template (HOT, YAML); it must declare the "
        "parameters "
        + ", ".join(templates.REQUIRED_PARAMETERS)
        + " and the outputs "
        + ", ".join(templates.REQUIRED_OUTPUTS)
        + "; default: shoal's built-in one. Groups choose it as template 'default'",
    )
    templates: Mapping[str, str] | None = opt(
        None,
        "more node group templates, name -> path, each checked like `template`: a group "
        "chooses one by its provider option `template`, or by the label `heat_template` "
        "(set on a cluster template, it reaches its clusters' groups); names: lowercase "
        "letters, digits, '-' and '_', at most 40, not 'default'",
    )
    networks: tuple[str, ...] = opt(
        (), "network ids of every server; none: Nova's 'auto' (allocate_network)"
    )
    catalog_refresh_seconds: float = opt(
        300.0,
        "zones, flavors and images are cached; an update refreshes them when older than this",
        lo=1,
    )
    api_timeout: float = opt(60.0, "seconds one API request may take", lo=1, hi=3600)

    def problems(self) -> list[str]:
        """What is wrong with these settings, each as `key: message` (key relative): a
        template that breaks the contract, a template name that cannot be one."""
        out: list[str] = []
        named = [("template", self.template)] if self.template is not None else []
        for name, path in sorted((self.templates or {}).items()):
            why = templates.name_problem(name)
            if why is not None:
                out.append(f"templates.{name}: {why}")
            else:
                named.append((f"templates.{name}", path))
        for key, path in named:
            try:
                templates.load_operator(path)
            except templates.TemplateError as exc:
                out.append(f"{key}: {exc}")
        return out

    def template_paths(self) -> dict[str, str | None]:
        """Every template a group may choose, by name (None: the built-in one)."""
        return {templates.DEFAULT: self.template, **dict(self.templates or {})}
