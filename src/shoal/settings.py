"""One typed settings tree, built once at the entry point and passed down.

Every option has a default, bounds and help text. Environment variables named
`SHOAL_<FIELD>` (for nested trees `SHOAL_<TREE>_<FIELD>`, e.g.
`SHOAL_CONDUCTOR_WORKERS`) override the defaults. Providers (the clouds and hosts
shoal drives) are named in a YAML file whose path is `SHOAL_CONFIG`
(`settings_file.py`); with no file, the embedded driver's (`sim`: providers `sim`
and `vms`). This module knows no driver: a driver's settings are its package's
(`drivers/<name>/settings.py`), found by name through `drivers/registry.py`, and
a kind with variables of its own (`SHOAL_SIM_*`) gives its providers' defaults
in `driver_defaults`. Nothing reads the environment or the file after
`Settings.from_env()`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal import settings_file
from shoal.drivers.registry import ProviderSettings
from shoal.options import SettingsError, check_bounds, check_required, opt, read_env

__all__ = [
    "AUTH_MODES",
    "DEFAULT_PROVIDER",
    "ConductorSettings",
    "KeystoneSettings",
    "ProviderSettings",
    "Settings",
    "SettingsError",
    "check_bounds",
    "check_required",
]


def default_data_dir() -> Path:
    """Per-user data directory: $XDG_DATA_HOME/shoal, else ~/.local/share/shoal."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "shoal"


@dataclass(frozen=True)
class ConductorSettings:
    """The reconcile loop."""

    workers: int = opt(8, "threads reconciling resources in parallel", lo=1, hi=256)
    driver_concurrency: int = opt(32, "parallel driver calls per process", lo=1, hi=1024)
    lease_seconds: float = opt(15.0, "a claim on a resource expires after this", lo=1, hi=3600)
    poll_seconds: float = opt(1.0, "idle wake-up period when nothing notifies", lo=0.01, hi=60)
    listen_poll_seconds: float = opt(
        10.0, "idle safety-net period while LISTEN/NOTIFY wakes it (PostgreSQL)", lo=0.01, hi=600
    )
    requeue_seconds: float = opt(2.0, "re-check period of a resource still in progress", lo=0.01)
    backoff_max_seconds: float = opt(60.0, "upper bound of retry backoff", lo=0.1)
    sweep_seconds: float = opt(60.0, "period of the orphan sweeper", lo=1)
    sweep_grace_seconds: float = opt(
        300.0,
        "a machine of a node group shoal deleted is swept only once seen so this long",
        lo=0,
    )
    tombstone_days: float = opt(
        30.0,
        "how long the record of a node group or cluster shoal deleted is kept (the sweeper "
        "deletes machines still tagged for it only meanwhile; later they are held)",
        lo=0.01,
    )
    sweep_breaker_share: float = opt(
        0.2,
        "the sweeper stops, deleting nothing, when it would delete more than this share of a "
        "provider's machines (and more than sweep_breaker_min)",
        lo=0,
        hi=1,
    )
    sweep_breaker_min: int = opt(
        10, "the sweeper's breaker never trips for this many machines or fewer", lo=0
    )
    provider_check_seconds: float = opt(
        60.0, "how often each provider is looked at (reachable, zones, flavors, images)", lo=1
    )
    driver_rate_per_s: float = opt(
        0.0, "driver calls per second per process (0 = unlimited); 429s slow it further", lo=0
    )
    kube_timeout_seconds: float = opt(
        3.0,
        "longest wait for one call to a cluster's Kubernetes API server (longer: the API "
        "server counts as unreachable for that pass)",
        lo=0.1,
        hi=60,
    )
    kube_check_seconds: float = opt(
        15.0,
        "how often a ready node group of a cluster shoal runs Kubernetes on reads its "
        "Nodes (readiness, labels, taints)",
        lo=0.5,
        hi=3600,
    )
    drain_timeout_seconds: float = opt(
        120.0,
        "how long shoal waits for a node's pods to be evicted before it removes the node "
        "anyway (and says so in an event)",
        lo=0,
        hi=86400,
    )


@dataclass(frozen=True)
class KeystoneSettings:
    """Authentication mode `keystone`: tokens validated by a real Keystone, with shoal's
    own service user (a clouds.yaml entry, openstacksdk's format and lookup)."""

    cloud: str | None = opt(
        None, "clouds.yaml entry of shoal's service user (it validates users' tokens)"
    )
    clouds_yaml: str | None = opt(None, "path of that clouds.yaml; default: openstacksdk's lookup")
    region_name: str | None = opt(None, "region of shoal's catalog entry; default: the entry's")
    cache_seconds: float = opt(
        300.0,
        "a validated token is trusted this long without asking Keystone again (never past "
        "its expiry); a revoked token may work this long",
        lo=0,
        hi=3600,
    )
    register: bool = opt(
        True,
        "at start, register shoal in the catalog as the container-infra service (Magnum's), "
        "so that `openstack coe` finds it; needs the service user's admin role",
    )
    service_name: str = opt("magnum", "the catalog service's name (type container-infra)")
    trusts: bool = opt(
        True,
        "at cluster create, take a Keystone trust from the user to shoal's service user, so "
        "that an OpenStack provider makes the cluster's servers in the user's project",
    )


AUTH_MODES = ("local", "keystone", "none")
# The API's worker threads per process (anyio's default thread limiter: sync routes and
# dependencies run on it); docs/decisions.md, "The API's worker threads".
API_THREADS = 8
API_THREADS_MAX = 256
DEFAULT_PROVIDER = "sim"  # the embedded default provider (and driver) without a config file


@dataclass(frozen=True)
class Settings:
    """Everything a shoal process needs to know, with defaults for the embedded setup."""

    data_dir: Path = opt(default_data_dir(), "directory for the embedded SQLite database")
    database_url: str | None = opt(
        None, "SQLAlchemy URL; default sqlite in data_dir (postgresql://... for HA)"
    )
    database_pool_max: int = opt(
        30,
        "most connections one process holds to PostgreSQL at once (4 stay open between "
        "uses); a thread past it waits for one. Keep the sum over a deployment's processes "
        "under the server's max_connections",
        lo=1,
        hi=1000,
    )
    host: str = opt("127.0.0.1", "address the API listens on")
    port: int = opt(9511, "port the API listens on", lo=0, hi=65535)
    api_threads: int = opt(
        API_THREADS,
        "API requests handled at once per process (the rest wait in order); each holds a "
        "thread, and on PostgreSQL a pooled connection, while it waits on the database or "
        "Keystone",
        lo=1,
        hi=API_THREADS_MAX,
    )
    public_url: str | None = opt(None, "base URL used in links; default from the request")
    driver: str = opt("sim", "driver of the embedded default provider when SHOAL_CONFIG is unset")
    config: str | None = opt(None, "YAML file naming the providers (SHOAL_CONFIG)")
    conductor: bool = opt(True, "run the conductor inside `shoal serve`")
    default_project: str = opt(
        "default",
        "project of the first admin token (auth local), and of requests without "
        "X-Project-Id (auth none)",
    )
    auth: str = opt(
        "local",
        "how requests are authenticated: local (tokens shoal issues: `shoal token`), keystone "
        "(a real Keystone; SHOAL_KEYSTONE_*), or none (development only: every request is "
        "an admin of the project its X-Project-Id names)",
    )
    keystone: KeystoneSettings = field(default_factory=KeystoneSettings)
    token_cache_seconds: float = opt(
        10.0,
        "auth local: a token checked once is trusted this long by each process (a token "
        "revoked through another process stops working within this time)",
        lo=0,
        hi=600,
    )
    allowed_hosts: str | None = opt(
        None,
        "comma-separated Host header values the API answers (DNS rebinding); default: "
        "localhost, 127.0.0.1, ::1, the listen address and public_url's host; * for any",
    )
    cors_origins: str | None = opt(
        None,
        "comma-separated origins (https://dash.example.org) whose web pages may call the "
        "API; default: none (no CORS, and a request from another origin may not change "
        "anything)",
    )
    quota_clusters: int = opt(20, "clusters per project (Magnum's default)", lo=0)
    page_limit: int = opt(1000, "default and maximum page size", lo=1, hi=100_000)
    driver_defaults: Mapping[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "each driver kind's defaults for its providers, from its variables "
            "(the sim's: SHOAL_SIM_*); a kind not here starts from its settings class"
        },
    )
    conductor_settings: ConductorSettings = field(default_factory=ConductorSettings)
    max_nodes_per_group: int = opt(
        1000, "nodes one node group may hold (node_count, max_node_count)", lo=1, hi=2**31 - 1
    )
    max_nodes_per_cluster: int = opt(
        5000, "nodes one cluster may hold over all its node groups", lo=1, hi=2**31 - 1
    )
    max_body_bytes: int = opt(
        1024 * 1024, "largest request body the API accepts (larger: 413)", lo=1024, hi=2**30
    )
    max_header_bytes: int = opt(
        32 * 1024, "largest request line plus headers the API accepts", lo=4096, hi=1024 * 1024
    )
    agent_interval_seconds: float = opt(
        10.0, "how often node agents are told to report (their heartbeat)", lo=0.1, hi=3600
    )
    log_level: str = opt("INFO", "log level: DEBUG, INFO, WARNING or ERROR")
    log_format: str = opt("text", "log format: text, or json (one JSON object a line)")
    secret_key_file: str | None = opt(
        None,
        "file holding the key that encrypts cluster CA private keys at rest; default: "
        "secret.key in data_dir, made on first start",
    )
    secret_key: str | None = field(
        default=None,
        repr=False,
        metadata={"help": "the key itself, instead of secret_key_file (never printed)"},
    )
    providers: tuple[ProviderSettings, ...] = ()  # () = one provider of the embedded driver
    default_provider: str = DEFAULT_PROVIDER

    def __post_init__(self) -> None:
        if not self.providers:  # never empty: one provider of the embedded driver
            embedded = ProviderSettings(
                name=DEFAULT_PROVIDER, driver=self.driver, options=self.defaults(self.driver)
            )
            object.__setattr__(self, "providers", (embedded,))
            object.__setattr__(self, "default_provider", DEFAULT_PROVIDER)

    def defaults(self, driver: str) -> Any:
        """The defaults of driver `driver`'s providers from its variables (None: the
        driver's settings class's own defaults)."""
        return self.driver_defaults.get(driver)

    def check_auth(self) -> None:
        """SettingsError naming the setting when the authentication mode cannot work."""
        if self.auth not in AUTH_MODES:
            raise SettingsError(
                f"SHOAL_AUTH={self.auth!r} is not one of {', '.join(AUTH_MODES)}: "
                + self.__dataclass_fields__["auth"].metadata["help"]
            )
        if self.auth == "keystone" and not self.keystone.cloud:
            raise SettingsError(
                "SHOAL_KEYSTONE_CLOUD: required with SHOAL_AUTH=keystone: the clouds.yaml entry "
                "of shoal's service user"
            )

    @property
    def api_url(self) -> str:
        """Where this deployment's API is reached: `public_url`, else the listen address."""
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'shoal.db'}"

    def provider(self, name: str) -> ProviderSettings:
        """The provider named `name` (SettingsError when none is)."""
        for p in self.providers:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.providers)
        raise SettingsError(f"no provider is named {name!r} (providers: {known})")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then `SHOAL_*` variables, then explicit keyword overrides."""
        env = os.environ if env is None else env
        cond = read_env(
            ConductorSettings, env, "SHOAL_CONDUCTOR_", overrides.pop("conductor_settings", {})
        )
        keystone = read_env(KeystoneSettings, env, "SHOAL_KEYSTONE_", overrides.pop("keystone", {}))
        providers = overrides.pop("providers", None)
        default = overrides.pop("default_provider", None)
        # Each driver kind with variables of its own (SHOAL_SIM_*): its providers' defaults;
        # a keyword named for the kind (sim={...}) overrides them.
        drivers = settings_file.driver_defaults(env, overrides)
        settings: Settings = read_env(
            cls,
            env,
            "SHOAL_",
            overrides,
            driver_defaults=drivers,
            conductor_settings=cond,
            keystone=keystone,
        )
        settings.check_auth()
        if providers is None:
            providers, default = settings_file.providers(settings.config, settings.driver, drivers)
        return dataclasses.replace(
            settings, providers=tuple(providers), default_provider=default or providers[0].name
        )
