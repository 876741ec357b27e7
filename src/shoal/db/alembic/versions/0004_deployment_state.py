"""deployment state: facts about the database itself (an unfinished copy by
`shoal db migrate`); the sweeper's state per provider (its mass-deletion breaker)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import shoal.db.types

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # `shoal db migrate` creates this table in an empty target before anything else,
    # to mark it as a copy under way (db/deployment_state.py): it may exist already.
    if sa.inspect(op.get_bind()).has_table("deployment_state"):
        _providers_sweeper()
        return
    op.create_table(
        "deployment_state",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", shoal.db.types.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_deployment_state")),
    )
    _providers_sweeper()


def _providers_sweeper() -> None:
    with op.batch_alter_table("providers") as batch:
        batch.add_column(sa.Column("sweeper", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("providers") as batch:
        batch.drop_column("sweeper")
    op.drop_table("deployment_state")
