"""conductors record their heartbeat period, and until when they count as up (three
periods after their last report), so that "is it up" is one query on the row

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import shoal.db.types

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conductors") as batch:
        batch.add_column(sa.Column("heartbeat_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("up_until", shoal.db.types.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("conductors") as batch:
        batch.drop_column("up_until")
        batch.drop_column("heartbeat_seconds")
