"""What the layers above `db/` name when they work inside one transaction: the
session (the unit of work they hand to repositories) and the records repositories
return for a change (rows of shoal's tables: read their fields, pass them back to
a repository; never queried above `db/`). The services and the API import these
names, never SQLAlchemy or `db.tables` (an import-linter contract)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from shoal.db.tables import ClusterRow as ClusterRecord
from shoal.db.tables import ClusterTemplateRow as ClusterTemplateRecord
from shoal.db.tables import NodeGroupRow as NodeGroupRecord

__all__ = ["ClusterRecord", "ClusterTemplateRecord", "NodeGroupRecord", "Session"]
