"""Operations on nodes (shoal): `/v1/clusters/{id}/operations`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from shoal.agent import protocol
from shoal.api import deps, schemas
from shoal.services import operations
from shoal.services.operations import OperationView

router = APIRouter(tags=["operations"])


def _ts(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _view(request: Request, view: OperationView, *, detail: bool) -> dict[str, Any]:
    op = view.operation
    done = sum(1 for t in view.tasks if t.state == protocol.SUCCEEDED)
    out: dict[str, Any] = {
        "uuid": op.uuid,
        "cluster_id": op.cluster_id,
        "nodegroup_id": op.nodegroup_id,
        "kind": op.kind,
        "params": op.params,
        "batch_size": op.batch_size,
        "state": op.state,
        "message": op.message,
        "progress": f"{done} of {len(op.nodes)} node(s) done",
        "created_at": _ts(op.created_at),
        "finished_at": _ts(op.finished_at),
        "links": deps.links(request, f"clusters/{op.cluster_id}/operations/{op.uuid}"),
    }
    if detail:
        out["nodes"] = list(op.nodes)
        out["tasks"] = [
            {
                "uuid": t.uuid,
                "node_id": t.node_id,
                "kind": t.kind,
                "state": t.state,
                "output": t.output,
                "exit_code": t.exit_code,
                "created_at": _ts(t.created_at),
                "started_at": _ts(t.started_at),
                "finished_at": _ts(t.finished_at),
            }
            for t in view.tasks
        ]
    return out


@router.post(
    "/clusters/{ident}/operations",
    status_code=202,
    openapi_extra=schemas.body("OperationCreate"),
)
def start_operation(
    request: Request, ident: str, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """shoal: run an operation (restart-services, upgrade-packages, upgrade-images, rebase,
    set-labels, reboot, rebuild, replace) on nodes of a cluster, `batch_size` at a time."""
    uuids = operations.start(deps.db(request), deps.caller(request), ident, body)
    return JSONResponse({"operations": uuids}, status_code=202)


@router.get("/clusters/{ident}/operations")
def list_operations(request: Request, ident: str) -> dict[str, Any]:
    views = operations.list_for(deps.db(request), deps.caller(request), ident)
    return {"operations": [_view(request, v, detail=False) for v in views]}


@router.get("/clusters/{ident}/operations/{uuid}")
def get_operation(request: Request, ident: str, uuid: str) -> dict[str, Any]:
    view = operations.get(deps.db(request), deps.caller(request), ident, uuid)
    return _view(request, view, detail=True)
