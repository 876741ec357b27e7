"""cluster certificate authorities

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 12:38:02.593927
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import shoal.db.types

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_cas",
        sa.Column("cluster_uuid", sa.String(length=36), nullable=False),
        sa.Column("cert_pem", sa.Text(), nullable=False),
        sa.Column("key_pem", sa.Text(), nullable=False),
        sa.Column("created_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("rotated_at", shoal.db.types.UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["cluster_uuid"],
            ["clusters.uuid"],
            name=op.f("fk_cluster_cas_cluster_uuid_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_uuid", name=op.f("pk_cluster_cas")),
    )


def downgrade() -> None:
    op.drop_table("cluster_cas")
