"""What the layers above `db/` name when they work inside one transaction: the
session (the unit of work they hand to repositories) and the values repositories
return for a change. A value is a frozen copy of the fields the services read,
never a row: a change goes back through a repository function that takes the
value's uuid and the new values (`clusters.touch(s, uuid, ...)`). A lookup made
`for_update` holds the row lock inside the repository until the transaction ends.

This module imports no table (an import-linter contract): the services and the API
cannot name a row, nor import SQLAlchemy or `db.tables` (another contract). Node
groups and node group templates come back as their domain values
(`m.NodeGroup`, `m.NodeGroupTemplate`): those are what the services read of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

__all__ = ["ClusterRef", "Health", "Session", "TemplateRef"]


@dataclass(frozen=True)
class ClusterRef:
    """A cluster as a change reads it (no derived counts, no conditions)."""

    uuid: str
    name: str
    project_id: str
    attrs: dict[str, Any]
    cluster_template_id: str | None = None
    deleting: bool = False
    health_status: str | None = None
    health_status_reason: dict[str, str] = field(default_factory=dict)
    # The providers its node groups were made in (None: not known); a new group adds its own.
    providers: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class Health:
    """Magnum's health fields of a cluster, as a client sets them."""

    status: str | None
    reason: dict[str, str]


@dataclass(frozen=True)
class TemplateRef:
    """A cluster template as a change reads it (without its node group templates)."""

    uuid: str
    name: str
    project_id: str
    attrs: dict[str, Any]
