"""vm slots: the VM of a virt host a node took (unique: one node per slot)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("vm_slot", sa.String(length=128), nullable=True))
        batch.create_index("ix_nodes_vm_slot", ["vm_slot"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_index("ix_nodes_vm_slot")
        batch.drop_column("vm_slot")
