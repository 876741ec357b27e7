"""One typed settings tree, built once at the entry point and passed down.

Every option has a default, bounds and help text. Environment variables named
`SHOAL_<FIELD>` (for nested trees `SHOAL_<TREE>_<FIELD>`, e.g.
`SHOAL_SIM_TIME_SCALE`) override the defaults. Providers (the clouds and hosts
shoal drives) are named in a YAML file whose path is `SHOAL_CONFIG`
(`settings_file.py`); with no file there is one provider, `sim`. Nothing reads
the environment or the file after `Settings.from_env()`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


class SettingsError(ValueError):
    """A setting has a value outside its bounds; the message names it."""


def _opt(
    default: Any,
    help: str,
    lo: float | None = None,
    hi: float | None = None,
    *,
    required: bool = False,
    pattern: str | None = None,
) -> Any:
    """A setting's field: default, help text, numeric bounds; `required` (a file must
    give it: no default fits every deployment) and `pattern` (a regular expression a
    string value must match)."""
    meta = {"help": help, "lo": lo, "hi": hi, "required": required, "pattern": pattern}
    return field(default=default, metadata=meta)


def default_data_dir() -> Path:
    """Per-user data directory: $XDG_DATA_HOME/shoal, else ~/.local/share/shoal."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "shoal"


@dataclass(frozen=True)
class SimSettings:
    """The simulated cloud (driver `sim`)."""

    seed: int = _opt(42, "random seed: the same seed gives the same world and timings")
    time_scale: float = _opt(
        1.0, "time compression: 100 makes a 20 s boot take 0.2 s", lo=0.001, hi=1_000_000
    )
    boot_seconds: float = _opt(20.0, "mean simulated boot time (simulated seconds)", lo=0)
    delete_seconds: float = _opt(5.0, "mean simulated delete time (simulated seconds)", lo=0)
    api_latency_ms: float = _opt(50.0, "mean simulated latency of one API call", lo=0)
    jitter: float = _opt(0.2, "relative jitter on every latency (0.2 = +/-20%)", lo=0, hi=1)
    rate_limit_per_s: float = _opt(
        0.0, "create calls per simulated second before 429 (0 = unlimited)", lo=0
    )
    rate_limit_burst_s: float = _opt(
        1.0, "seconds of creates the rate limit's bucket holds (burst = rate x this)", lo=0
    )
    database_url: str | None = _opt(
        None,
        "where the sim keeps its world; default: sim.db in the data directory, or "
        "shoal's own database when that is PostgreSQL",
    )
    own_process: bool = _opt(
        False,
        "run the sim cloud in a child process of its own, as a real cloud runs apart "
        "from shoal (its calls then cross a local socket)",
    )
    per_group: bool = _opt(
        False,
        "act like a cloud that realises each node group as one stack (Heat): shoal then "
        "sends a group's members in one call instead of a call per machine",
    )


@dataclass(frozen=True)
class ConductorSettings:
    """The reconcile loop."""

    workers: int = _opt(8, "threads reconciling resources in parallel", lo=1, hi=256)
    driver_concurrency: int = _opt(32, "parallel driver calls per process", lo=1, hi=1024)
    lease_seconds: float = _opt(15.0, "a claim on a resource expires after this", lo=1, hi=3600)
    poll_seconds: float = _opt(1.0, "idle wake-up period when nothing notifies", lo=0.01, hi=60)
    listen_poll_seconds: float = _opt(
        10.0, "idle safety-net period while LISTEN/NOTIFY wakes it (PostgreSQL)", lo=0.01, hi=600
    )
    requeue_seconds: float = _opt(2.0, "re-check period of a resource still in progress", lo=0.01)
    backoff_max_seconds: float = _opt(60.0, "upper bound of retry backoff", lo=0.1)
    sweep_seconds: float = _opt(60.0, "period of the orphan sweeper", lo=1)
    provider_check_seconds: float = _opt(
        60.0, "how often each provider is looked at (reachable, zones, flavors, images)", lo=1
    )
    driver_rate_per_s: float = _opt(
        0.0, "driver calls per second per process (0 = unlimited); 429s slow it further", lo=0
    )


@dataclass(frozen=True)
class OpenStackSettings:
    """An OpenStack cloud (driver `openstack`): a clouds.yaml entry, in openstacksdk's
    own format and lookup, plus what shoal needs to share a cloud project safely."""

    # Parallel calls to one OpenStack provider when its `concurrency` is not given:
    # openstacksdk's HTTP connection pool holds 10, and Nova's API takes creates at
    # about that width before they queue behind its scheduler.
    PROVIDER_CONCURRENCY: ClassVar[int] = 10

    cloud: str | None = _opt(None, "the clouds.yaml entry to use", required=True)
    clouds_yaml: str | None = _opt(
        None,
        "path of the clouds.yaml file; default: openstacksdk's lookup (OS_CLIENT_CONFIG_FILE, "
        "./clouds.yaml, ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml)",
    )
    region_name: str | None = _opt(None, "the region of the entry to use; default: the entry's")
    deployment: str | None = _opt(
        None,
        "a name for this shoal deployment, unique among those sharing the cloud project: "
        "every server carries it as a tag, and shoal lists, adopts and sweeps only the "
        "servers that carry it",
        required=True,
        pattern=r"^[a-z0-9][a-z0-9-]{0,39}$",
    )
    networks: tuple[str, ...] = _opt(
        (), "networks (ids or names) of node groups that name none; none: Nova's 'auto'"
    )
    server_groups: bool = _opt(
        True,
        "keep each node group's servers in a Nova server group of its placement policy "
        "(anti-affinity for masters, soft-anti-affinity for workers by default)",
    )
    catalog_refresh_seconds: float = _opt(
        300.0,
        "zones, flavors and images are cached; a create refreshes them when older than this "
        "(the conductor's provider check refreshes them too)",
        lo=1,
    )
    api_timeout: float = _opt(60.0, "seconds one API request may take", lo=1, hi=3600)
    create_settle_seconds: float = _opt(
        120.0,
        "a create whose answer was lost (a timeout, a reset, a 5xx) may still make its "
        "server: for this long shoal looks for it before it creates the machine again",
        lo=0,
        hi=86400,
    )
    server_group_grace_seconds: float = _opt(
        600.0,
        "a server group of this deployment that stays empty (no server in it) this long is "
        "deleted; a node group that grows again gets a new one",
        lo=1,
    )


DRIVERS = ("sim", "openstack", "libvirt")
DEFAULT_PROVIDER = "sim"


def driver_settings() -> dict[str, type[Any]]:
    """Each driver this version can run, with the class of its typed settings (a
    provider's `settings:` in the config file). A driver named in DRIVERS but not
    here gets a clear "not available" instead of "unknown driver"."""
    return {"sim": SimSettings, "openstack": OpenStackSettings}


@dataclass(frozen=True)
class ProviderSettings:
    """One provider: a named cloud or set of hosts, its driver and that driver's settings."""

    name: str = _opt(DEFAULT_PROVIDER, "the name node groups choose it by")
    driver: str = _opt("sim", "the driver that talks to it: " + ", ".join(DRIVERS))
    options: Any = _opt(None, "the driver's own typed settings (SimSettings, OpenStackSettings)")
    rate_per_s: float | None = _opt(
        None, "driver calls per second to this provider (default: the conductor's)", lo=0
    )
    concurrency: int | None = _opt(
        None, "parallel driver calls to this provider per process (default: all)", lo=1, hi=1024
    )
    concurrency_per_target: int | None = _opt(
        None, "parallel calls per target (one libvirt host) of this provider", lo=1, hi=1024
    )


@dataclass(frozen=True)
class Settings:
    """Everything a shoal process needs to know, with defaults for the embedded setup."""

    data_dir: Path = _opt(default_data_dir(), "directory for the embedded SQLite database")
    database_url: str | None = _opt(
        None, "SQLAlchemy URL; default sqlite in data_dir (postgresql://... for HA)"
    )
    host: str = _opt("127.0.0.1", "address the API listens on")
    port: int = _opt(9511, "port the API listens on", lo=0, hi=65535)
    public_url: str | None = _opt(None, "base URL used in links; default from the request")
    driver: str = _opt("sim", "driver of the embedded default provider when SHOAL_CONFIG is unset")
    config: str | None = _opt(None, "YAML file naming the providers (SHOAL_CONFIG)")
    conductor: bool = _opt(True, "run the conductor inside `shoal serve`")
    default_project: str = _opt("default", "project of requests without X-Project-Id")
    quota_clusters: int = _opt(20, "clusters per project (Magnum's default)", lo=0)
    page_limit: int = _opt(1000, "default and maximum page size", lo=1, hi=100_000)
    sim: SimSettings = field(default_factory=SimSettings)
    conductor_settings: ConductorSettings = field(default_factory=ConductorSettings)
    max_nodes_per_group: int = _opt(
        1000, "nodes one node group may hold (node_count, max_node_count)", lo=1, hi=2**31 - 1
    )
    max_nodes_per_cluster: int = _opt(
        5000, "nodes one cluster may hold over all its node groups", lo=1, hi=2**31 - 1
    )
    max_body_bytes: int = _opt(
        1024 * 1024, "largest request body the API accepts (larger: 413)", lo=1024, hi=2**30
    )
    max_header_bytes: int = _opt(
        32 * 1024, "largest request line plus headers the API accepts", lo=4096, hi=1024 * 1024
    )
    log_level: str = _opt("INFO", "log level: DEBUG, INFO, WARNING or ERROR")
    log_format: str = _opt("text", "log format: text, or json (one JSON object a line)")
    secret_key_file: str | None = _opt(
        None,
        "file holding the key that encrypts cluster CA private keys at rest; default: "
        "secret.key in data_dir, made on first start",
    )
    secret_key: str | None = field(
        default=None,
        repr=False,
        metadata={"help": "the key itself, instead of secret_key_file (never printed)"},
    )
    providers: tuple[ProviderSettings, ...] = ()  # () = the embedded default: one sim
    default_provider: str = DEFAULT_PROVIDER

    def __post_init__(self) -> None:
        if not self.providers:  # never empty: the embedded default is one sim provider
            embedded = ProviderSettings(name=DEFAULT_PROVIDER, driver="sim", options=self.sim)
            object.__setattr__(self, "providers", (embedded,))
            object.__setattr__(self, "default_provider", DEFAULT_PROVIDER)

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

    def first_sim_db_url(self) -> str | None:
        """The world of the first sim provider (what `shoal db migrate` copies), if any."""
        sim = next((p for p in self.providers if p.driver == "sim"), None)
        return self.sim_db_url(sim) if sim is not None else None

    def sim_db_url(self, provider: ProviderSettings) -> str:
        """Where a sim provider keeps its world: its own `database_url`, else for the
        first sim provider shoal's PostgreSQL database (row locks) or, embedded,
        `sim.db` beside shoal's file; for any other sim provider `sim-<name>.db` in
        the data directory (two providers, two worlds). SQLite has one writer per
        file, and the simulated cloud must not wait on shoal's transactions (nor
        shoal on its) any more than a real cloud does."""
        sim: SimSettings = provider.options
        if sim.database_url:
            return sim.database_url
        first = next(p for p in self.providers if p.driver == "sim")
        if provider.name == first.name:
            if self.database_url:
                return self.database_url
            return f"sqlite:///{self.data_dir / 'sim.db'}"
        if self.database_url:
            raise SettingsError(
                f"sim provider {provider.name!r} needs its own settings.database_url: "
                "two sim worlds cannot share shoal's PostgreSQL database"
            )
        return f"sqlite:///{self.data_dir / f'sim-{provider.name}.db'}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then `SHOAL_*` variables, then explicit keyword overrides."""
        env = os.environ if env is None else env
        sim = _from_env(SimSettings, env, "SHOAL_SIM_", overrides.pop("sim", {}))
        cond = _from_env(
            ConductorSettings, env, "SHOAL_CONDUCTOR_", overrides.pop("conductor_settings", {})
        )
        providers = overrides.pop("providers", None)
        default = overrides.pop("default_provider", None)
        settings: Settings = _from_env(
            cls, env, "SHOAL_", overrides, sim=sim, conductor_settings=cond
        )
        if providers is None:
            from shoal import settings_file

            providers, default = settings_file.providers(settings)
        return dataclasses.replace(
            settings, providers=tuple(providers), default_provider=default or providers[0].name
        )


def check_bounds(obj: Any, key: Callable[[str], str]) -> None:
    """SettingsError naming (as `key(field)` says) the first field of `obj` outside its
    bounds: a number outside [lo, hi], a string that does not match its pattern."""
    for f in dataclasses.fields(obj):
        lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
        pattern = f.metadata.get("pattern")
        v = getattr(obj, f.name)
        numeric = isinstance(v, int | float) and not isinstance(v, bool)
        if numeric and ((lo is not None and v < lo) or (hi is not None and v > hi)):
            raise SettingsError(
                f"{key(f.name)}={v} is out of bounds [{lo}, {hi}]: {f.metadata.get('help')}"
            )
        if pattern and isinstance(v, str) and not re.match(pattern, v):
            raise SettingsError(
                f"{key(f.name)}={v!r} does not match {pattern}: {f.metadata.get('help')}"
            )


def check_required(obj: Any, key: Callable[[str], str]) -> None:
    """SettingsError naming the first required field of `obj` that was not given."""
    for f in dataclasses.fields(obj):
        if f.metadata.get("required") and getattr(obj, f.name) is None:
            raise SettingsError(f"{key(f.name)}: required: {f.metadata.get('help')}")


def _from_env(
    cls: type[Any], env: Mapping[str, str], prefix: str, overrides: Mapping[str, Any], **fixed: Any
) -> Any:
    values: dict[str, Any] = dict(fixed)
    for f in dataclasses.fields(cls):
        if f.name in fixed:
            continue
        key = prefix + f.name.upper()
        if f.name in overrides:
            values[f.name] = overrides[f.name]
        elif key in env:
            values[f.name] = _parse(f, env[key], key)
    obj = cls(**values)
    check_bounds(obj, lambda name: prefix + name.upper())
    return obj


def _parse(f: dataclasses.Field[Any], raw: str, key: str) -> Any:
    kind = str(f.type)
    try:
        if kind == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path":
            return Path(raw)
        return raw or None if "None" in kind else raw
    except ValueError as exc:
        help_text = f.metadata.get("help")
        raise SettingsError(f"{key}={raw!r} is not a valid {kind}: {help_text}") from exc
