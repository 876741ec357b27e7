"""nodes keep their index in their provider's group (a Heat member index, reported by a
per-group driver), so that nodes_to_remove can name a node by it

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27 20:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("provider_index", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("provider_index")
