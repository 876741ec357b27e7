"""node groups keep their provider's id of the whole group (a Heat stack's id), reported
by a per-group driver: the node group's stack_id

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 17:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodegroups") as batch:
        batch.add_column(sa.Column("provider_ref", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodegroups") as batch:
        batch.drop_column("provider_ref")
