"""operations and node tasks (in-place operations through the node agent, reboot,
rebuild, replace), node agent heartbeats and auto-repair state

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import shoal.db.types

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "operations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("cluster_uuid", sa.String(length=36), nullable=False),
        sa.Column("nodegroup_uuid", sa.String(length=36), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("nodes", JSON, nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("created_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("updated_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.Column("finished_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cluster_uuid"],
            ["clusters.uuid"],
            name=op.f("fk_operations_cluster_uuid_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operations")),
        sa.UniqueConstraint("uuid", name=op.f("uq_operations_uuid")),
    )
    op.create_index(op.f("ix_operations_cluster_uuid"), "operations", ["cluster_uuid"])
    op.create_index(op.f("ix_operations_nodegroup_uuid"), "operations", ["nodegroup_uuid"])
    op.create_table(
        "node_tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("operation_uuid", sa.String(length=36), nullable=False),
        sa.Column("cluster_uuid", sa.String(length=36), nullable=False),
        sa.Column("nodegroup_uuid", sa.String(length=36), nullable=False),
        sa.Column("node_uuid", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("created_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("started_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.Column("finished_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cluster_uuid"],
            ["clusters.uuid"],
            name=op.f("fk_node_tasks_cluster_uuid_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_tasks")),
        sa.UniqueConstraint("uuid", name=op.f("uq_node_tasks_uuid")),
    )
    op.create_index(op.f("ix_node_tasks_cluster_uuid"), "node_tasks", ["cluster_uuid"])
    op.create_index(op.f("ix_node_tasks_node_uuid"), "node_tasks", ["node_uuid"])
    op.create_index(op.f("ix_node_tasks_operation_uuid"), "node_tasks", ["operation_uuid"])
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("agent_seen_at", shoal.db.types.UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("repair_step", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("repair_at", shoal.db.types.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("repair_at")
        batch.drop_column("repair_step")
        batch.drop_column("agent_seen_at")
    op.drop_table("node_tasks")
    op.drop_table("operations")
