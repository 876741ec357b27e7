"""providers: a node group's provider, what the conductor remembers about a group
(failing boots, zones without room), and each provider's last check

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import shoal.db.types

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodegroups") as batch:
        batch.add_column(sa.Column("provider", sa.String(length=64), nullable=True))
        batch.add_column(
            sa.Column(
                "memory",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch.create_index(batch.f("ix_nodegroups_provider"), ["provider"], unique=False)
    op.create_table(
        "providers",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("driver", sa.String(length=32), nullable=False),
        sa.Column("reachable", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column(
            "facts",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("checked_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.Column("checked_by", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_providers")),
    )


def downgrade() -> None:
    op.drop_table("providers")
    with op.batch_alter_table("nodegroups") as batch:
        batch.drop_index(batch.f("ix_nodegroups_provider"))
        batch.drop_column("memory")
        batch.drop_column("provider")
