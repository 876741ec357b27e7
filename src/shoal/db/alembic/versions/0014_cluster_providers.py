"""clusters keep the providers their node groups were made in, so that deleting a
cluster asks only those to release what they hold for it (a Heat cluster stack, an
address lease), not every configured provider

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 10:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(sa.Column("providers", JSON, nullable=True))
    # Clusters made before: the providers of the groups they have now. A cluster
    # whose groups are all gone already keeps NULL: every provider is asked for it.
    conn = op.get_bind()
    clusters = sa.table("clusters", sa.column("uuid"), sa.column("providers", JSON))
    groups = sa.table("nodegroups", sa.column("cluster_uuid"), sa.column("provider"))
    used: dict[str, set[str | None]] = {}
    for cluster_uuid, provider in conn.execute(
        sa.select(groups.c.cluster_uuid, groups.c.provider).distinct()
    ):
        used.setdefault(cluster_uuid, set()).add(provider)
    for cluster_uuid, names in used.items():
        conn.execute(
            clusters.update()
            .where(clusters.c.uuid == cluster_uuid)
            .values(providers=sorted(names, key=lambda n: n or ""))
        )


def downgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("providers")
