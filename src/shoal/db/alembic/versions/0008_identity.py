"""identity: API tokens shoal issues (auth mode local), and the delegated
credential a cluster's machines are made with (a Keystone trust), sealed

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import shoal.db.types

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("hint", sa.String(length=16), nullable=False),
        sa.Column("project_id", sa.String(length=255), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("created_by", sa.String(length=255), nullable=True),
        sa.Column("created_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("expires_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.Column("revoked_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("digest", name=op.f("uq_api_tokens_digest")),
        sa.UniqueConstraint("uuid", name=op.f("uq_api_tokens_uuid")),
    )
    op.create_index(op.f("ix_api_tokens_project_id"), "api_tokens", ["project_id"])
    op.create_table(
        "cluster_credentials",
        sa.Column("cluster_uuid", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("created_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_uuid"],
            ["clusters.uuid"],
            name=op.f("fk_cluster_credentials_cluster_uuid_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_uuid", name=op.f("pk_cluster_credentials")),
    )


def downgrade() -> None:
    op.drop_table("cluster_credentials")
    op.drop_index(op.f("ix_api_tokens_project_id"), table_name="api_tokens")
    op.drop_table("api_tokens")
