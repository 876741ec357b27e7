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
import ipaddress
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
    hosted: bool = _opt(
        False,
        "its machines are VMs on the virt hosts of each cluster (servers of the first sim "
        "provider's world that are nodes of a role=virt group)",
    )
    agents: bool = _opt(
        False,
        "emulate a node agent on every ready server (real HTTP to shoal's API): operations "
        "and agent health work on the sim",
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
    sweep_grace_seconds: float = _opt(
        300.0,
        "a machine of a node group shoal deleted is swept only once seen so this long",
        lo=0,
    )
    tombstone_days: float = _opt(
        30.0,
        "how long the record of a node group or cluster shoal deleted is kept (the sweeper "
        "deletes machines still tagged for it only meanwhile; later they are held)",
        lo=0.01,
    )
    sweep_breaker_share: float = _opt(
        0.2,
        "the sweeper stops, deleting nothing, when it would delete more than this share of a "
        "provider's machines (and more than sweep_breaker_min)",
        lo=0,
        hi=1,
    )
    sweep_breaker_min: int = _opt(
        10, "the sweeper's breaker never trips for this many machines or fewer", lo=0
    )
    provider_check_seconds: float = _opt(
        60.0, "how often each provider is looked at (reachable, zones, flavors, images)", lo=1
    )
    driver_rate_per_s: float = _opt(
        0.0, "driver calls per second per process (0 = unlimited); 429s slow it further", lo=0
    )


@dataclass(frozen=True)
class LibvirtHostSettings:
    """One libvirt host of a provider: a zone and a target of its own."""

    name: str = _opt("", "the host's name: the availability zone node groups name it by")
    uri: str = _opt("", "libvirt URI: qemu:///system, qemu+ssh://host/system, test:///default")
    cores: int = _opt(0, "vCPUs shoal may place on the host (its own accounting)")
    ram_mb: int = _opt(0, "MiB of guest memory shoal may place on the host")
    disk_gb: int = _opt(0, "GB of flavor disk shoal may place on the host (0: not counted)", lo=0)


@dataclass(frozen=True)
class LibvirtFlavor:
    """A machine size: what a node group's `flavor_id` names on a libvirt provider."""

    name: str = _opt("", "the flavor's name")
    vcpus: int = _opt(1, "virtual CPUs", lo=1, hi=4096)
    ram_mb: int = _opt(1024, "guest memory in MiB", lo=16)
    disk_gb: int = _opt(0, "size of the machine's disk in GB (0: the base image's size)", lo=0)


@dataclass(frozen=True)
class LibvirtImage:
    """A bootable image: a base disk in the storage pool (each machine gets a copy-on-write
    overlay of it), a kernel and initrd on the host, or both."""

    name: str = _opt("", "the image's name (a node group's `image_id`)")
    disk: str | None = _opt(None, "base disk: a volume name in the storage pool")
    kernel: str | None = _opt(None, "a kernel file on the host (direct kernel boot)")
    initrd: str | None = _opt(None, "an initrd file on the host, with `kernel`")
    cmdline: str = _opt("", "kernel command line, with `kernel` (user data is added to it)")


LIBVIRT_FLAVORS = (
    LibvirtFlavor("m1.tiny", 1, 128, 1),
    LibvirtFlavor("m1.small", 1, 2048, 20),
    LibvirtFlavor("m1.medium", 2, 4096, 40),
    LibvirtFlavor("m1.large", 4, 8192, 80),
)


@dataclass(frozen=True)
class LibvirtSettings:
    """A set of libvirt hosts (driver `libvirt`): each host is a zone; shoal places
    machines on them with its own capacity accounting (libvirt refuses no overcommit)."""

    hosts: tuple[LibvirtHostSettings, ...] = _opt(
        (), "the hosts: name, uri, cores, ram_mb, disk_gb"
    )
    network: str = _opt("default", "the libvirt network machines join (DHCP hands out addresses)")
    pool: str = _opt("default", "the storage pool of base disks and machines' overlays")
    flavors: tuple[LibvirtFlavor, ...] = _opt(LIBVIRT_FLAVORS, "machine sizes by name")
    images: tuple[LibvirtImage, ...] = _opt((), "bootable images by name")
    domain_type: str = _opt("kvm", "libvirt domain type: kvm, or qemu (TCG, no /dev/kvm)")
    domain_template: str | None = _opt(
        None, "file holding the domain XML template ({name} placeholders); default: built in"
    )
    console_dir: str | None = _opt(
        None, "directory on the host for each machine's serial console log (default: a pty)"
    )
    scope: str = _opt(
        "",
        "this deployment's name on hosts that other shoal deployments share: each lists "
        "(and sweeps) only the machines of its own scope",
    )
    uri_template: str | None = _opt(
        None,
        "hosted: the provider's hosts are the virt hosts of each cluster (nodes of role=virt "
        "groups), reached at this URI ({name} and {address} filled in, e.g. "
        "qemu+ssh://root@{address}/system); its machines are the VMs of their vms",
    )
    cpu_allocation_ratio: float = _opt(
        4.0,
        "hosted: vCPUs placed per physical CPU of a virt host (its size is read from the "
        "host; memory is never overcommitted)",
        lo=1.0,
        hi=64.0,
    )

    def problems(self) -> list[str]:
        """What is wrong with these settings, each as `key: message` (key relative)."""
        out: list[str] = []
        if not self.hosts and not self.uri_template:
            out.append("hosts: at least one host is required (or uri_template: hosted)")
        named: tuple[tuple[str, tuple[Any, ...]], ...] = (
            ("hosts", self.hosts),
            ("flavors", self.flavors),
            ("images", self.images),
        )
        for what, items in named:
            seen: set[str] = set()
            for i, item in enumerate(items):
                if not item.name:
                    out.append(f"{what}[{i}].name: a name is required")
                elif item.name in seen:
                    out.append(f"{what}[{i}].name: {item.name!r} is named twice")
                seen.add(item.name)
        for i, h in enumerate(self.hosts):
            if not h.uri:
                out.append(f"hosts[{i}].uri: a libvirt URI is required")
            for key in ("cores", "ram_mb"):
                if getattr(h, key) < 1:
                    out.append(f"hosts[{i}].{key}: the host's capacity is required (>= 1)")
        for i, im in enumerate(self.images):
            if not (im.disk or im.kernel):
                out.append(f"images[{i}]: an image needs a base `disk`, a `kernel`, or both")
            if im.initrd and not im.kernel:
                out.append(f"images[{i}].initrd: an initrd needs a `kernel`")
        if self.domain_type not in ("kvm", "qemu"):
            out.append(f"domain_type: {self.domain_type!r} is neither kvm nor qemu")
        return out


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


@dataclass(frozen=True)
class KeystoneSettings:
    """Authentication mode `keystone`: tokens validated by a real Keystone, with shoal's
    own service user (a clouds.yaml entry, openstacksdk's format and lookup)."""

    cloud: str | None = _opt(
        None, "clouds.yaml entry of shoal's service user (it validates users' tokens)"
    )
    clouds_yaml: str | None = _opt(None, "path of that clouds.yaml; default: openstacksdk's lookup")
    region_name: str | None = _opt(None, "region of shoal's catalog entry; default: the entry's")
    cache_seconds: float = _opt(
        300.0,
        "a validated token is trusted this long without asking Keystone again (never past "
        "its expiry); a revoked token may work this long",
        lo=0,
        hi=3600,
    )
    register: bool = _opt(
        True,
        "at start, register shoal in the catalog as the container-infra service (Magnum's), "
        "so that `openstack coe` finds it; needs the service user's admin role",
    )
    service_name: str = _opt("magnum", "the catalog service's name (type container-infra)")
    trusts: bool = _opt(
        True,
        "at cluster create, take a Keystone trust from the user to shoal's service user, so "
        "that an OpenStack provider makes the cluster's servers in the user's project",
    )


# The local driver's settings (shoal.drivers.local; kept here while the settings
# classes of drivers live in this module).
LOCAL_BRIDGE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")


@dataclass(frozen=True)
class PreloadImage:
    """An OCI archive imported into each machine's containerd (namespace k8s.io) once
    containerd runs there, and the further names it is tagged with."""

    archive: str = _opt("", "path of an OCI image archive on the shoal host")
    names: tuple[str, ...] = _opt((), "further references to tag it with (e.g. the pause image)")


@dataclass(frozen=True)
class LocalSettings:
    """Namespace machines on the shoal host itself (driver `local`): each machine is a
    set of Linux namespaces whose root is the host's file system seen through overlays,
    with its own address on a bridge. Root only; see docs/drivers.md."""

    state_dir: str = _opt(
        "/var/lib/shoal/local", "where each machine's directory and the address leases live"
    )
    bridge: str = _opt("shoal-local0", "the host bridge machines join (made if missing)")
    subnet: str = _opt(
        "10.216.0.0/24", "machines' addresses; the host takes the first on the bridge"
    )
    kubernetes_bin: str = _opt(
        "", "directory of Kubernetes programs shown at /usr/local/bin in every machine"
    )
    agent: str = _opt(
        "", "the shoal-agent program shown at /usr/local/bin (default: next to shoal's Python)"
    )
    preload: tuple[PreloadImage, ...] = _opt((), "images each machine's containerd starts with")
    flavors: tuple[str, ...] = _opt(("local",), "flavor names (machines are not sized)")
    images: tuple[str, ...] = _opt(("host",), "image names (every machine runs the host's)")
    zone: str = _opt("local", "the one availability zone")
    agents: bool = _opt(
        True, "its machines run shoal-agent (shown at /usr/local/bin): a silent one is unhealthy"
    )

    def problems(self) -> list[str]:
        """What is wrong with these settings, each as `key: message` (key relative)."""
        out: list[str] = []
        if not LOCAL_BRIDGE_NAME.match(self.bridge):
            out.append(f"bridge: {self.bridge!r} is not an interface name (a-z0-9-, 1-15)")
        try:
            net = ipaddress.ip_network(self.subnet)
            if net.version != 4 or net.num_addresses < 4:
                out.append(f"subnet: {self.subnet} must be an IPv4 range of 4 addresses or more")
        except ValueError as exc:
            out.append(f"subnet: {exc}")
        if not self.state_dir.startswith("/"):
            out.append(f"state_dir: {self.state_dir!r} must be an absolute path")
        for i, p in enumerate(self.preload):
            if not p.archive:
                out.append(f"preload[{i}].archive: a path is required")
        if not self.flavors or not self.images or not self.zone:
            out.append("flavors, images, zone: at least one name each")
        return out


AUTH_MODES = ("local", "keystone", "none")
DRIVERS = ("sim", "openstack", "libvirt", "local")
DEFAULT_PROVIDER = "sim"
VMS_PROVIDER = "vms"  # the embedded default's VMs on virt hosts (domain/virt.py)


def driver_settings() -> dict[str, type[Any]]:
    """Each driver this version can run, with the class of its typed settings (a
    provider's `settings:` in the config file). A driver named in DRIVERS but not
    here gets a clear "not available" instead of "unknown driver"."""
    return {
        "sim": SimSettings,
        "libvirt": LibvirtSettings,
        "openstack": OpenStackSettings,
        "local": LocalSettings,
    }


@dataclass(frozen=True)
class ProviderSettings:
    """One provider: a named cloud or set of hosts, its driver and that driver's settings."""

    name: str = _opt(DEFAULT_PROVIDER, "the name node groups choose it by")
    driver: str = _opt("sim", "the driver that talks to it: " + ", ".join(DRIVERS))
    options: Any = _opt(
        None,
        "the driver's own typed settings (SimSettings, LibvirtSettings, OpenStackSettings)",
    )
    rate_per_s: float | None = _opt(
        None, "driver calls per second to this provider (default: the conductor's)", lo=0
    )
    concurrency: int | None = _opt(
        None, "parallel driver calls to this provider per process (default: all)", lo=1, hi=1024
    )
    concurrency_per_target: int | None = _opt(
        None, "parallel calls per target (one libvirt host) of this provider", lo=1, hi=1024
    )
    agents: bool = _opt(
        False,
        "its nodes run shoal-agent (their images carry it): a node whose agent never reports "
        "within the health policy's startup timeout is unhealthy",
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
    default_project: str = _opt(
        "default",
        "project of the first admin token (auth local), and of requests without "
        "X-Project-Id (auth none)",
    )
    auth: str = _opt(
        "local",
        "how requests are authenticated: local (tokens shoal issues: `shoal token`), keystone "
        "(a real Keystone; SHOAL_KEYSTONE_*), or none (development only: every request is "
        "an admin of the project its X-Project-Id names)",
    )
    keystone: KeystoneSettings = field(default_factory=KeystoneSettings)
    token_cache_seconds: float = _opt(
        10.0,
        "auth local: a token checked once is trusted this long by each process (a token "
        "revoked through another process stops working within this time)",
        lo=0,
        hi=600,
    )
    allowed_hosts: str | None = _opt(
        None,
        "comma-separated Host header values the API answers (DNS rebinding); default: "
        "localhost, 127.0.0.1, ::1, the listen address and public_url's host; * for any",
    )
    cors_origins: str | None = _opt(
        None,
        "comma-separated origins (https://dash.example.org) whose web pages may call the "
        "API; default: none (no CORS, and a request from another origin may not change "
        "anything)",
    )
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
    agent_interval_seconds: float = _opt(
        10.0, "how often node agents are told to report (their heartbeat)", lo=0.1, hi=3600
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
        sim = next((p for p in self.providers if p.driver == "sim" and not p.options.hosted), None)
        return self.sim_db_url(sim) if sim is not None else None

    def sim_db_url(self, provider: ProviderSettings) -> str:
        """Where a sim provider keeps its world: its own `database_url`, else for the
        first sim provider shoal's PostgreSQL database (row locks) or, embedded,
        `sim.db` beside shoal's file; for any other sim provider `sim-<name>.db` in
        the data directory (two providers, two worlds). SQLite has one writer per
        file, and the simulated cloud must not wait on shoal's transactions (nor
        shoal on its) any more than a real cloud does."""
        sim: SimSettings = provider.options
        first = next(
            (p for p in self.providers if p.driver == "sim" and not p.options.hosted), provider
        )
        if sim.hosted and provider.name != first.name:
            return self.sim_db_url(first)  # VMs live on the servers of that world
        if sim.database_url:
            return sim.database_url
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
        keystone = _from_env(
            KeystoneSettings, env, "SHOAL_KEYSTONE_", overrides.pop("keystone", {})
        )
        providers = overrides.pop("providers", None)
        default = overrides.pop("default_provider", None)
        settings: Settings = _from_env(
            cls, env, "SHOAL_", overrides, sim=sim, conductor_settings=cond, keystone=keystone
        )
        settings.check_auth()
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
