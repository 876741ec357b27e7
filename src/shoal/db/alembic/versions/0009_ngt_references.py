"""ngt references: a cluster template's entry may reference a standalone NGT

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodegroup_templates") as batch:
        batch.add_column(sa.Column("reference_uuid", sa.String(length=36), nullable=True))
        batch.create_index("ix_nodegroup_templates_reference_uuid", ["reference_uuid"])
        batch.create_foreign_key(
            "fk_nodegroup_templates_reference_uuid_nodegroup_templates",
            "nodegroup_templates",
            ["reference_uuid"],
            ["uuid"],
        )


def downgrade() -> None:
    with op.batch_alter_table("nodegroup_templates") as batch:
        batch.drop_constraint(
            "fk_nodegroup_templates_reference_uuid_nodegroup_templates", type_="foreignkey"
        )
        batch.drop_index("ix_nodegroup_templates_reference_uuid")
        batch.drop_column("reference_uuid")
