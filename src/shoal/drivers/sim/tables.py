"""The sim world's own tables (prefix `sim_`, own MetaData, not in shoal's migrations).

shoal's records never join these: shoal learns about machines only through the
driver, exactly as it would from a real cloud. Tag columns are indexed because
the conductor lists machines by node group once per pass.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

# One row (id = 1): config JSON, the version bumped by every admin change (so
# processes know when to reload their cache), and the create-rate token bucket.
meta = Table(
    "sim_meta",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("version", Integer, nullable=False),
    Column("config", Text, nullable=False),
    Column("opened_with", Text, nullable=False),
    Column("bucket_tokens", Float, nullable=False),
    Column("bucket_at", Float, nullable=False),
)

servers = Table(
    "sim_servers",
    metadata,
    # seq numbers the servers; the private address is derived from it.
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("machine_id", String(64), nullable=False, unique=True),
    Column("name", String(255), nullable=False),
    Column("project", String(64), nullable=False, index=True),
    Column("cluster", String(64), nullable=False, index=True),
    Column("nodegroup", String(64), nullable=False, index=True),
    Column("node", String(64), nullable=False, index=True),
    Column("role", String(64), nullable=False, server_default=""),
    # The five shoal tags are these columns (the contract's tags are exactly those).
    Column("flavor", String(64), nullable=False),
    Column("image", String(255), nullable=False),
    Column("az", String(64), nullable=False),
    Column("vcpus", Integer, nullable=False),
    Column("ram_mb", BigInteger, nullable=False),
    Column("created_at", Float, nullable=False),  # simulated seconds
    Column("ready_at", Float, nullable=False),  # BUILDING until then
    Column("up_at", Float, nullable=False),  # first boot done: address reported
    Column("fault", Text),  # set: ERROR from ready_at on
    Column("deleting_at", Float),  # set: DELETING ...
    Column("gone_at", Float, index=True),  # ... until then, then gone
    Column("delete_failures", Integer, nullable=False, default=0),
)

# What each server was given to boot with (a cloud keeps it: Nova's user_data),
# so that an emulated agent (or a test) can read a node's identity and token.
user_data = Table(
    "sim_user_data",
    metadata,
    Column("machine_id", String(64), primary_key=True),
    Column("user_data", Text, nullable=False),
)

quotas = Table(
    "sim_quotas",
    metadata,
    Column("project", String(64), primary_key=True),
    Column("instances", BigInteger, nullable=False),
    Column("cores", BigInteger, nullable=False),
    Column("ram_mb", BigInteger, nullable=False),
)

# Running totals, so that quota and capacity checks read one row, not the world.
# scope is "project" (key = project id) or "az" (key = zone name).
usage = Table(
    "sim_usage",
    metadata,
    Column("scope", String(16), primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("instances", BigInteger, nullable=False),
    Column("cores", BigInteger, nullable=False),
    Column("ram_mb", BigInteger, nullable=False),
)

faults = Table(
    "sim_faults",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),
    Column("op", String(16), nullable=False),
    Column("az", String(64)),
    Column("cluster", String(64)),
    Column("nodegroup", String(64)),
    Column("flavor", String(64)),
    Column("count", Integer),  # fires at most this many times (None: no limit)
    Column("probability", Float, nullable=False),
    Column("message", Text),
    Column("status", Integer),
    Column("retry_after", Float),
    Column("fired", Integer, nullable=False, default=0),
    Column("seen", Integer, nullable=False, default=0),
)

# VMs on virt hosts (a hosted sim provider): each is a server row too (zone = its
# host's name, flavor "vm"); this row says which server it runs on and holds the
# domain XML it was given, as a libvirt host would keep it.
vms = Table(
    "sim_vms",
    metadata,
    Column("machine_id", String(64), primary_key=True),
    Column("host", String(64), nullable=False, index=True),  # the host server's machine id
    Column("xml", Text, nullable=False),
)
