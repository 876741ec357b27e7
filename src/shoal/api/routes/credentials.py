"""/v1/credentials: Magnum's rotation of a cluster's trust (Horizon's *Rotate Cluster
Credentials*), answered in Magnum's error shape: shoal does not implement it."""

from __future__ import annotations

from fastapi import APIRouter, Request

from shoal.api import deps
from shoal.services import clusters

router = APIRouter(prefix="/credentials", tags=["credentials"])


@router.patch("/{cluster_ident}")
def rotate_credentials(request: Request, cluster_ident: str) -> None:
    """Not implemented: always 400 saying what to do instead (404 for an unknown
    cluster, 403 for a caller who may not update it)."""
    clusters.rotate_credentials(deps.db(request), deps.caller(request), cluster_ident)
