"""shoal's own tables (SQLAlchemy 2 declarative). Alembic migrations in
db/alembic/versions must match these; tests/integration/test_migrations.py
fails when they drift.

Resources refer to each other by uuid (the identity users see). Long-tail
Magnum attributes live in JSON columns; anything the API filters, sorts or
sums on, and everything the conductor claims work by, is a real column.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from shoal.db.types import JSONType, UTCDateTime, utcnow

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

UUID = String(36)
NAME = String(255)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Timestamps:
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)


class ClusterTemplateRow(Timestamps, Base):
    __tablename__ = "cluster_templates"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    project_id: Mapped[str] = mapped_column(NAME, index=True)
    user_id: Mapped[str] = mapped_column(NAME)
    name: Mapped[str] = mapped_column(NAME, index=True)
    public: Mapped[bool] = mapped_column(Boolean, default=False)
    attrs: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    source_id: Mapped[str | None] = mapped_column(UUID)


class NodeGroupTemplateRow(Timestamps, Base):
    __tablename__ = "nodegroup_templates"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    project_id: Mapped[str] = mapped_column(NAME, index=True)
    name: Mapped[str] = mapped_column(NAME, index=True)
    # Set when the NGT is embedded in a cluster template; deleted with it.
    cluster_template_uuid: Mapped[str | None] = mapped_column(
        UUID, ForeignKey("cluster_templates.uuid", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer, default=0)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    source_id: Mapped[str | None] = mapped_column(UUID)
    # Set on an entry of a cluster template that references a standalone NGT instead
    # of embedding one: `spec` then holds only the attributes over it, and the NGT's
    # own spec is copied when a cluster is made. The NGT cannot be deleted meanwhile.
    reference_uuid: Mapped[str | None] = mapped_column(
        UUID, ForeignKey("nodegroup_templates.uuid"), index=True
    )


class ClusterRow(Timestamps, Base):
    __tablename__ = "clusters"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    project_id: Mapped[str] = mapped_column(NAME, index=True)
    user_id: Mapped[str] = mapped_column(NAME)
    name: Mapped[str] = mapped_column(NAME, index=True)
    cluster_template_id: Mapped[str | None] = mapped_column(UUID)  # display only
    source_id: Mapped[str | None] = mapped_column(UUID)  # display only
    attrs: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    observed_generation: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(32), default="CREATE_IN_PROGRESS")
    status_reason: Mapped[str | None] = mapped_column(Text)
    health_status: Mapped[str | None] = mapped_column(String(16))
    health_status_reason: Mapped[dict[str, str]] = mapped_column(JSONType, default=dict)
    api_address: Mapped[str | None] = mapped_column(String(255))
    conditions: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    deleting: Mapped[bool] = mapped_column(Boolean, default=False)
    # When the current operation started (create_timeout is measured from here).
    operation_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    next_reconcile_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    # The providers its node groups were ever made in (None in it: the deployment's
    # default), written with each group: those release what they hold for the cluster
    # when it goes (domain/release.py). NULL: not known (a cluster
    # whose groups were gone before migration 0014): every provider is asked.
    providers: Mapped[list[str | None] | None] = mapped_column(JSONType)


class NodeGroupRow(Timestamps, Base):
    __tablename__ = "nodegroups"
    __table_args__ = (UniqueConstraint("cluster_uuid", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    cluster_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("clusters.uuid", ondelete="CASCADE"), index=True
    )
    project_id: Mapped[str] = mapped_column(NAME, index=True)
    name: Mapped[str] = mapped_column(NAME)
    role: Mapped[str] = mapped_column(String(64))
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    # Counts are columns (summed for cluster node_count/master_count in SQL);
    # the rest of the NodeGroupSpec is JSON.
    node_count: Mapped[int] = mapped_column(Integer, default=1)
    min_node_count: Mapped[int] = mapped_column(Integer, default=0)
    max_node_count: Mapped[int | None] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    source_id: Mapped[str | None] = mapped_column(UUID)
    version: Mapped[str | None] = mapped_column(String(64))
    generation: Mapped[int] = mapped_column(Integer, default=1)
    observed_generation: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(32), default="CREATE_IN_PROGRESS")
    status_reason: Mapped[str | None] = mapped_column(Text)
    conditions: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    deleting: Mapped[bool] = mapped_column(Boolean, default=False)
    operation_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    next_reconcile_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    # The provider its machines live in (None: the deployment's default), fixed at
    # creation: a group never moves to another cloud with its machines left behind.
    provider: Mapped[str | None] = mapped_column(String(64), index=True)
    # What the conductor remembers between passes (domain.health.GroupMemory).
    memory: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    # The provider's id of the whole group, from a per-group driver (a Heat stack's id):
    # the node group's stack_id in the API. None: no such thing (the node group's uuid).
    provider_ref: Mapped[str | None] = mapped_column(String(255))


class NodeRow(Base):
    __tablename__ = "nodes"
    __table_args__ = (Index("ix_nodes_cluster_uuid_address", "cluster_uuid", "address"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    name: Mapped[str] = mapped_column(NAME, index=True)
    cluster_uuid: Mapped[str] = mapped_column(UUID, index=True)
    nodegroup_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("nodegroups.uuid", ondelete="CASCADE"), index=True
    )
    project_id: Mapped[str] = mapped_column(NAME)
    state: Mapped[str] = mapped_column(String(16), default="PENDING")
    availability_zone: Mapped[str | None] = mapped_column(NAME)
    address: Mapped[str | None] = mapped_column(String(64))
    provider_id: Mapped[str | None] = mapped_column(NAME)
    image_id: Mapped[str | None] = mapped_column(NAME)
    flavor_id: Mapped[str | None] = mapped_column(NAME)
    reason: Mapped[str | None] = mapped_column(Text)
    to_delete: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    ready_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # When its provider took its create (it began to build): its boot is timed from here.
    building_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revision: Mapped[str | None] = mapped_column(String(16))  # what it was made from
    agent_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime())  # last heartbeat
    # Auto-repair: the last rung tried (1 reboot, 2 rebuild) and when.
    repair_step: Mapped[int] = mapped_column(Integer, default=0)
    repair_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The VM slot of a virt host it took (domain/virt.py): "<virt group uuid>:<id>".
    vm_slot: Mapped[str | None] = mapped_column(String(128), unique=True, index=True)
    # Its index in its provider's group (a Heat member index), for nodes_to_remove.
    provider_index: Mapped[str | None] = mapped_column(String(16))


class EventRow(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("clusters.uuid", ondelete="CASCADE"), index=True
    )
    nodegroup_uuid: Mapped[str | None] = mapped_column(UUID)
    node_uuid: Mapped[str | None] = mapped_column(UUID)
    time: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    type: Mapped[str] = mapped_column(String(16), default="Normal")
    reason: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text, default="")


class LeaseRow(Base):
    """A conductor's claim on one resource ("nodegroup:<uuid>", "cluster:<uuid>")."""

    __tablename__ = "leases"
    resource: Mapped[str] = mapped_column(String(80), primary_key=True)
    holder: Mapped[str] = mapped_column(NAME)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class ConductorRow(Timestamps, Base):
    """One running conductor process, as Magnum's mservices shows it."""

    __tablename__ = "conductors"
    __table_args__ = (UniqueConstraint("host", "binary"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(NAME)
    binary: Mapped[str] = mapped_column(NAME, default="shoal-conductor")
    report_count: Mapped[int] = mapped_column(Integer, default=0)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    last_seen_up: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_seconds: Mapped[float | None] = mapped_column(Float)  # it reports this often
    # Up until then: MISSED_BEATS periods after its last report (domain/fleet.py).
    up_until: Mapped[datetime | None] = mapped_column(UTCDateTime())


class QuotaRow(Timestamps, Base):
    __tablename__ = "quotas"
    __table_args__ = (UniqueConstraint("project_id", "resource"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[str] = mapped_column(NAME)
    resource: Mapped[str] = mapped_column(String(64))
    hard_limit: Mapped[int] = mapped_column(Integer)


class ClusterCARow(Base):
    """A cluster's certificate authority (made on first use, replaced by a rotation).

    `key_pem` is the CA's private key, sealed with the operator's secret key
    (`domain.sealing`; plaintext PEM in rows written before sealing, until shoal
    seals them on start). It never leaves the server (no response or event carries it)."""

    __tablename__ = "cluster_cas"
    cluster_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("clusters.uuid", ondelete="CASCADE"), primary_key=True
    )
    cert_pem: Mapped[str] = mapped_column(Text)
    key_pem: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    rotated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ProviderRow(Base):
    """A provider's last check by a conductor: reachable or not (and why), and what it
    offers (zones, flavors, images, features). The API reads it; conductors write it."""

    __tablename__ = "providers"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    driver: Mapped[str] = mapped_column(String(32))
    reachable: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(Text)
    facts: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    checked_at: Mapped[datetime] = mapped_column(UTCDateTime())
    checked_by: Mapped[str] = mapped_column(NAME)
    # Why the sweeper stopped deleting this provider's machines (its breaker), if it did.
    sweeper: Mapped[str | None] = mapped_column(Text)


class OperationRow(Base):
    """An operation on the nodes of one node group (restart services, upgrade
    packages, reboot, rebuild, replace ...), run node by node or in batches."""

    __tablename__ = "operations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    cluster_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("clusters.uuid", ondelete="CASCADE"), index=True
    )
    nodegroup_uuid: Mapped[str] = mapped_column(UUID, index=True)
    project_id: Mapped[str] = mapped_column(NAME)
    kind: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    nodes: Mapped[list[str]] = mapped_column(JSONType, default=list)  # targets, in order
    batch_size: Mapped[int] = mapped_column(Integer, default=1)
    state: Mapped[str] = mapped_column(String(16), default="RUNNING")
    message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class NodeTaskRow(Base):
    """One node's part of an operation: run by its agent (it pulls and reports) or
    by the conductor through the driver (reboot, rebuild, replace)."""

    __tablename__ = "node_tasks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    operation_uuid: Mapped[str] = mapped_column(UUID, index=True)
    cluster_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("clusters.uuid", ondelete="CASCADE"), index=True
    )
    nodegroup_uuid: Mapped[str] = mapped_column(UUID)
    node_uuid: Mapped[str] = mapped_column(UUID, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    state: Mapped[str] = mapped_column(String(16), default="PENDING")
    output: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class DeploymentStateRow(Base):
    """Facts about this database itself, by key: `copy` while `shoal db migrate` is
    filling it (serve and conductor refuse such a database)."""

    __tablename__ = "deployment_state"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ApiTokenRow(Base):
    """An API token shoal issued (authentication mode `local`). Only the token's SHA-256
    is kept: the token itself is shown once, when it is made."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(UUID, unique=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    hint: Mapped[str] = mapped_column(String(16))  # the token's first characters
    project_id: Mapped[str] = mapped_column(NAME, index=True)
    user_id: Mapped[str] = mapped_column(NAME)
    role: Mapped[str] = mapped_column(String(16))
    description: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str | None] = mapped_column(NAME)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ClusterCredentialRow(Base):
    """The credential a cluster's machines are made with when it is not the provider's
    own (a Keystone trust from the user who created the cluster), sealed at rest."""

    __tablename__ = "cluster_credentials"
    cluster_uuid: Mapped[str] = mapped_column(
        UUID, ForeignKey("clusters.uuid", ondelete="CASCADE"), primary_key=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    sealed: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


def table_of(row_cls: type[Base]) -> Table:
    """The Core table of a mapped class, for hot paths that skip the ORM's identity
    map and unit of work. (The declarative base types `__table__` as any FromClause;
    a class mapped by `__tablename__` has a Table, which insert() and update() need.)"""
    return cast(Table, row_cls.__table__)


class OrphanRow(Base):
    """A machine the sweeper holds: tagged by shoal, but for a node group the database
    does not know (a restored backup, a database from elsewhere). Refreshed by every
    sweep; deleted only once its group has a tombstone or an admin asked
    (`delete_requested_at`). What it claims comes from its tags."""

    __tablename__ = "orphans"
    provider: Mapped[str] = mapped_column(String(64), primary_key=True)
    machine_id: Mapped[str] = mapped_column(NAME, primary_key=True)
    name: Mapped[str] = mapped_column(NAME)
    state: Mapped[str] = mapped_column(String(16))
    tags: Mapped[dict[str, str]] = mapped_column(JSONType, default=dict)
    project_id: Mapped[str | None] = mapped_column(NAME)
    cluster_uuid: Mapped[str | None] = mapped_column(NAME, index=True)
    nodegroup_uuid: Mapped[str | None] = mapped_column(NAME)
    role: Mapped[str | None] = mapped_column(String(64))
    flavor_id: Mapped[str | None] = mapped_column(NAME)
    image_id: Mapped[str | None] = mapped_column(NAME)
    availability_zone: Mapped[str | None] = mapped_column(NAME)
    first_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime())
    delete_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    delete_requested_by: Mapped[str | None] = mapped_column(NAME)


class TombstoneRow(Base):
    """A node group or cluster shoal deleted (written in the transaction that removed
    its row): the sweeper may delete machines still tagged for it. Purged after
    `tombstone_days`."""

    __tablename__ = "tombstones"
    uuid: Mapped[str] = mapped_column(UUID, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # "nodegroup" | "cluster"
    cluster_uuid: Mapped[str] = mapped_column(UUID)
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
