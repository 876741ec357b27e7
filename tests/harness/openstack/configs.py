"""The config files of the test cloud's services, written into its work dir.

Every service listens on 127.0.0.1 only, keeps its SQLite databases and logs
under its own folder of the work dir, and talks to the others through
Keystone's catalog. RPC is oslo.messaging's in-process fake:// (no broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REGION = "RegionOne"
SERVICE_PROJECT = "service"


@dataclass(frozen=True)
class Ports:
    keystone: int
    glance: int
    placement: int
    nova: int
    heat: int = 0  # 0 until a test asks for Heat (OpenStackCloud.start_heat)


@dataclass(frozen=True)
class Layout:
    """Where one cloud's files live and where its services listen."""

    work: Path
    venv: Path
    ports: Ports
    passwords: dict[str, str]  # service user name -> password (throwaway, per cloud)

    @property
    def keystone_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.keystone}/v3"

    @property
    def glance_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.glance}"

    @property
    def placement_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.placement}"

    @property
    def nova_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.nova}/v2.1"

    @property
    def heat_url(self) -> str:
        """Heat's API root; its catalog endpoint adds `/v1/%(project_id)s`."""
        return f"http://127.0.0.1:{self.ports.heat}"

    def dir(self, service: str) -> Path:
        return self.work / service


def _authtoken(layout: Layout, user: str) -> str:
    return f"""
[keystone_authtoken]
www_authenticate_uri = {layout.keystone_url}
auth_url = {layout.keystone_url}
auth_type = password
username = {user}
password = {layout.passwords[user]}
project_name = {SERVICE_PROJECT}
user_domain_name = Default
project_domain_name = Default
region_name = {REGION}
"""


def keystone(layout: Layout) -> Path:
    d = layout.dir("keystone")
    d.mkdir(parents=True, exist_ok=True)
    path = d / "keystone.conf"
    path.write_text(f"""[DEFAULT]
log_file = {d}/keystone.log
[database]
connection = sqlite:///{d}/keystone.db
[token]
provider = fernet
[fernet_tokens]
key_repository = {d}/fernet-keys
[fernet_receipts]
# (its default is under /etc/keystone)
key_repository = {d}/fernet-keys
[credential]
key_repository = {d}/credential-keys
[identity]
# bcrypt's minimum: the test users' passwords are throwaway
password_hash_rounds = 4
[cache]
enabled = true
backend = dogpile.cache.memory
""")
    return path


def glance(layout: Layout) -> Path:
    d = layout.dir("glance")
    d.mkdir(parents=True, exist_ok=True)
    for sub in ("images", "staging", "tasks", "cache"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    path = d / "glance-api.conf"
    path.write_text(
        f"""[DEFAULT]
log_file = {d}/glance.log
enabled_backends = fs:file
worker_self_reference_url = {layout.glance_url}
image_cache_dir = {d}/cache
[database]
connection = sqlite:///{d}/glance.db
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = {d}/images
[os_glance_staging_store]
filesystem_store_datadir = {d}/staging
[os_glance_tasks_store]
filesystem_store_datadir = {d}/tasks
[paste_deploy]
flavor = keystone
config_file = {layout.venv}/etc/glance/glance-api-paste.ini
"""
        + _authtoken(layout, "glance")
    )
    return path


def placement(layout: Layout) -> Path:
    d = layout.dir("placement")
    d.mkdir(parents=True, exist_ok=True)
    path = d / "placement.conf"
    path.write_text(
        f"""[DEFAULT]
log_file = {d}/placement.log
[placement_database]
connection = sqlite:///{d}/placement.db
[api]
auth_strategy = keystone
"""
        + _authtoken(layout, "placement")
    )
    return path


def nova(layout: Layout) -> Path:
    d = layout.dir("nova")
    d.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "instances", "lock"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    path = d / "nova.conf"
    path.write_text(
        f"""[DEFAULT]
log_file = {d}/nova.log
transport_url = fake://
compute_driver = fake.FakeDriver
host = aio
my_ip = 127.0.0.1
state_path = {d}/state
instances_path = {d}/instances
default_thread_pool_size = 20
[wsgi]
api_paste_config = {layout.venv}/etc/nova/api-paste.ini
[api]
response_validation = ignore
[api_database]
connection = sqlite:///{d}/nova_api.db
[database]
connection = sqlite:///{d}/nova_cell1.db
[oslo_concurrency]
lock_path = {d}/lock
[oslo_messaging_notifications]
driver = noop
[scheduler]
discover_hosts_in_cells_interval = -1
[filter_scheduler]
shuffle_best_same_weighed_hosts = true
host_subset_size = 3
[placement]
auth_type = password
auth_url = {layout.keystone_url}
username = nova
password = {layout.passwords["nova"]}
project_name = {SERVICE_PROJECT}
user_domain_name = Default
project_domain_name = Default
region_name = {REGION}
[glance]
region_name = {REGION}
[compute]
max_concurrent_builds = 10
"""
        + _authtoken(layout, "nova")
    )
    return path


# Heat encrypts the credentials it keeps with this (32 bytes); a test cloud's own.
HEAT_AUTH_KEY = "shoal-test-cloud-heat-key-32byte"


def heat(layout: Layout) -> Path:
    """Heat's config: engine and API in one process (heat_allinone.py), fake:// RPC.

    `action_retry_limit = 0`: upstream's 5 makes Heat delete and re-create a server
    that went to ERROR five times with back-off before the stack fails (89 s for a
    2-server no-valid-host stack); a test wants the failure at once.

    `[cache] enabled`: as deployed Heat has it (kolla-ansible's heat.conf sets it, with
    memcached), so Heat memoizes its look-ups of flavors and images by name and its
    constraint checks. Without it each member's validation looks its flavor and image
    up again (a nested stack is validated at its parent's create and again at its own):
    `bench heat`'s shoal side made 782 flavor calls to Nova over its create, 362 with
    it (docs/benchmarks.md). In memory: one engine process.

    `rpc_response_timeout = 300` (upstream 60): the engine calls itself to create a
    nested stack and waits for the reply; on a loaded 2-core machine that call took
    over 60 s (validating 20 members), Heat failed the group stack with
    `MessagingTimeout` while the nested stack went on making its servers, and the
    update after it made them a second time (docs/decisions.md, "Servers Heat lost")."""
    d = layout.dir("heat")
    d.mkdir(parents=True, exist_ok=True)
    root = layout.keystone_url.removesuffix("/v3")
    path = d / "heat.conf"
    path.write_text(
        f"""[DEFAULT]
log_file = {d}/heat.log
transport_url = fake://
rpc_response_timeout = 300
num_engine_workers = 1
auth_encryption_key = {HEAT_AUTH_KEY}
heat_metadata_server_url = {layout.heat_url}/
heat_waitcondition_server_url = {layout.heat_url}/v1/waitcondition
max_resources_per_stack = -1
region_name_for_services = {REGION}
action_retry_limit = 0
[database]
connection = sqlite:///{d}/heat.db
sqlite_synchronous = false
[cache]
enabled = true
backend = dogpile.cache.memory
[paste_deploy]
api_paste_config = {layout.venv}/etc/heat/api-paste.ini
[oslo_messaging_notifications]
driver = noop
[trustee]
auth_type = password
auth_url = {layout.keystone_url}
username = heat
password = {layout.passwords.get("heat", "")}
user_domain_name = Default
[clients_keystone]
auth_uri = {root}
"""
        + _authtoken(layout, "heat")
    )
    return path
