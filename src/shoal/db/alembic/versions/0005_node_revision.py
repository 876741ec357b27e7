"""node revision: what each node was made from (image, flavor, volumes, bootstrap),
so that a rollout knows which nodes to replace

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 11:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("revision", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("revision")
