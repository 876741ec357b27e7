"""The openstack driver's typed settings: a provider's `settings:` in the config file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from shoal.options import opt


@dataclass(frozen=True)
class OpenStackSettings:
    """An OpenStack cloud (driver `openstack`): a clouds.yaml entry, in openstacksdk's
    own format and lookup, plus what shoal needs to share a cloud project safely."""

    # Parallel calls to one OpenStack provider when its `concurrency` is not given:
    # openstacksdk's HTTP connection pool holds 10, and Nova's API takes creates at
    # about that width before they queue behind its scheduler.
    PROVIDER_CONCURRENCY: ClassVar[int] = 10

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
        "every server carries it as a tag, and shoal lists, adopts and sweeps only the "
        "servers that carry it",
        required=True,
        pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
    )
    networks: tuple[str, ...] = opt(
        (), "networks (ids or names) of node groups that name none; none: Nova's 'auto'"
    )
    server_groups: bool = opt(
        True,
        "keep each node group's servers in a Nova server group of its placement policy "
        "(anti-affinity for masters, soft-anti-affinity for workers by default)",
    )
    catalog_refresh_seconds: float = opt(
        300.0,
        "zones, flavors and images are cached; a create refreshes them when older than this "
        "(the conductor's provider check refreshes them too)",
        lo=1,
    )
    api_timeout: float = opt(60.0, "seconds one API request may take", lo=1, hi=3600)
    create_settle_seconds: float = opt(
        120.0,
        "a create whose answer was lost (a timeout, a reset, a 5xx) may still make its "
        "server: for this long shoal looks for it before it creates the machine again",
        lo=0,
        hi=86400,
    )
    server_group_grace_seconds: float = opt(
        600.0,
        "a server group of this deployment that stays empty (no server in it) this long is "
        "deleted; a node group that grows again gets a new one",
        lo=1,
    )
