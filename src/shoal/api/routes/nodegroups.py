"""/v1/clusters/{cluster}/nodegroups (microversion >= 1.9)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from shoal.api import deps, schemas, serializers
from shoal.services import nodegroups

router = APIRouter(prefix="/clusters/{cluster}/nodegroups", tags=["nodegroups"])


def _gate(request: Request) -> None:
    deps.need(request, 1, 9, "node groups")


def _list(request: Request, cluster: str, detail: bool) -> dict[str, Any]:
    _gate(request)
    pg = deps.page(request)
    role = request.query_params.get("role") or None
    views = nodegroups.list_page(deps.db(request), deps.caller(request), cluster, pg, role)
    items = [serializers.nodegroup(request, v, detail=detail) for v in views]
    return deps.collection(request, "nodegroups", items, pg, path=f"clusters/{cluster}/nodegroups")


@router.get("")
def list_nodegroups(request: Request, cluster: str) -> dict[str, Any]:
    return _list(request, cluster, detail=False)


@router.get("/detail")
def list_detail(request: Request, cluster: str) -> dict[str, Any]:
    return _list(request, cluster, detail=True)


@router.post("", status_code=202, openapi_extra=schemas.body("NodeGroupCreate"))
def create_nodegroup(
    request: Request, cluster: str, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """All attributes; `nodegroup_template_id`; `from_nodegroup`; plus overrides."""
    _gate(request)
    view = nodegroups.create(
        deps.db(request), deps.caller(request), cluster, body, deps.provider_names(request)
    )
    return JSONResponse(serializers.nodegroup(request, view), status_code=202)


@router.get("/{ident}")
def get_nodegroup(request: Request, cluster: str, ident: str) -> dict[str, Any]:
    _gate(request)
    view = nodegroups.get(deps.db(request), deps.caller(request), cluster, ident)
    return serializers.nodegroup(request, view)


@router.patch("/{ident}", status_code=202, openapi_extra=schemas.body("JsonPatch"))
def update_nodegroup(
    request: Request, cluster: str, ident: str, patch: list[Any] = Depends(deps.json_patch)
) -> JSONResponse:
    _gate(request)
    view = nodegroups.update(deps.db(request), deps.caller(request), cluster, ident, patch)
    return JSONResponse(serializers.nodegroup(request, view), status_code=202)


@router.delete("/{ident}", status_code=204)
def delete_nodegroup(request: Request, cluster: str, ident: str, force: bool = False) -> Response:
    """`?force=true` (shoal): delete virt hosts even while they carry VMs."""
    _gate(request)
    nodegroups.delete(deps.db(request), deps.caller(request), cluster, ident, force=force)
    return Response(status_code=204)
