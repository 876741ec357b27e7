"""orphans held by the sweeper, and tombstones of the node groups and clusters shoal
deleted (the sweeper deletes a machine only for a tombstone or an admin's request)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import shoal.db.types

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "orphans",
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("machine_id", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("tags", JSON, nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=True),
        sa.Column("cluster_uuid", sa.String(length=255), nullable=True),
        sa.Column("nodegroup_uuid", sa.String(length=255), nullable=True),
        sa.Column("role", sa.String(length=64), nullable=True),
        sa.Column("flavor_id", sa.String(length=255), nullable=True),
        sa.Column("image_id", sa.String(length=255), nullable=True),
        sa.Column("availability_zone", sa.String(length=255), nullable=True),
        sa.Column("first_seen", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("last_seen", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("delete_requested_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.Column("delete_requested_by", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("provider", "machine_id", name=op.f("pk_orphans")),
    )
    op.create_index(op.f("ix_orphans_cluster_uuid"), "orphans", ["cluster_uuid"])
    op.create_table(
        "tombstones",
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("cluster_uuid", sa.String(length=36), nullable=False),
        sa.Column("deleted_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("uuid", name=op.f("pk_tombstones")),
    )
    op.create_index(op.f("ix_tombstones_deleted_at"), "tombstones", ["deleted_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_tombstones_deleted_at"), table_name="tombstones")
    op.drop_table("tombstones")
    op.drop_index(op.f("ix_orphans_cluster_uuid"), table_name="orphans")
    op.drop_table("orphans")
