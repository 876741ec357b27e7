"""/v1/orphans (shoal, admins): the machines the sweeper holds because their node
groups are unknown to the database; a deletion an admin asks for; the adoption of
a cluster a restored database lost."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from shoal.api import deps, schemas, serializers
from shoal.db.types import utcnow
from shoal.services import orphans
from shoal.services.orphans import OrphanView

router = APIRouter(prefix="/orphans", tags=["orphans"])


def _view(request: Request, o: OrphanView) -> dict[str, Any]:
    h, s = o.held, o.held.seen
    return {
        "provider": s.provider,
        "machine_id": s.machine_id,
        "name": s.name,
        "state": s.state,
        "first_seen": serializers.ts(h.first_seen),
        "last_seen": serializers.ts(h.last_seen),
        "age_seconds": int(orphans.age(h, utcnow())),
        "tags": dict(s.tags),
        "project_id": s.project_id,
        "cluster_id": s.cluster_uuid,
        "cluster_name": o.cluster_name,
        "nodegroup_id": s.nodegroup_uuid,
        "nodegroup_name": o.nodegroup_name,
        "node_id": s.machine_id,
        "node_name": s.name,
        "role": s.role,
        "flavor_id": s.flavor_id,
        "image_id": s.image_id,
        "availability_zone": s.availability_zone,
        "fate": o.fate,
        "delete_requested_at": serializers.ts(h.delete_requested_at),
        "delete_requested_by": h.delete_requested_by,
        "links": deps.links(request, f"orphans/{s.machine_id}"),
    }


@router.get("")
def list_orphans(request: Request) -> dict[str, Any]:
    """Every machine the sweeper holds, oldest sighting first."""
    views = orphans.list_all(deps.db(request), deps.caller(request))
    return {"orphans": [_view(request, o) for o in views]}


@router.delete("/{machine_id}", status_code=202)
def delete_orphan(request: Request, machine_id: str) -> Response:
    """Have the next sweep delete this held machine."""
    orphans.request_delete(deps.db(request), deps.caller(request), [machine_id])
    return Response(status_code=202)


@router.post("/adopt", status_code=201, openapi_extra=schemas.body("OrphanAdopt"))
def adopt_cluster(
    request: Request, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """Make the cluster `cluster_id` again from the held machines that claim it
    (`name`: its name; default: from the node names)."""
    cluster = orphans.adopt(deps.db(request), deps.caller(request), body)
    out = {"uuid": cluster.uuid, "name": cluster.name, "project_id": cluster.project_id}
    return JSONResponse(out, status_code=201)
