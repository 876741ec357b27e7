"""nodes keep when their provider took their create (they began to build), so that a
boot is timed from there, not from a wait for the provider's rate limit

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-30 02:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import shoal.db.types

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("building_at", shoal.db.types.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("building_at")
