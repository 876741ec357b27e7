"""/v1/nodegrouptemplates: shoal's standalone (and embedded) node group templates."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from shoal.api import deps, schemas, serializers
from shoal.services import ngtemplates

router = APIRouter(prefix="/nodegrouptemplates", tags=["nodegrouptemplates"])


@router.get("")
def list_ngts(request: Request) -> dict[str, Any]:
    pg = deps.page(request)
    items = ngtemplates.list_page(deps.db(request), deps.caller(request), pg)
    return deps.collection(
        request, "nodegrouptemplates", [serializers.ngt(request, t) for t in items], pg
    )


@router.get("/detail")
def list_detail(request: Request) -> dict[str, Any]:
    return list_ngts(request)


@router.post("", status_code=201, openapi_extra=schemas.body("NodeGroupTemplateCreate"))
def create_ngt(
    request: Request, response: Response, body: dict[str, Any] = Depends(deps.json_object)
) -> dict[str, Any]:
    """From attributes, or `from_nodegroup` (a node group uuid) plus overrides."""
    t = ngtemplates.create(deps.db(request), deps.caller(request), body)
    obj = serializers.ngt(request, t)
    response.headers["Location"] = obj["links"][0]["href"]
    return obj


@router.get("/{ident}")
def get_ngt(request: Request, ident: str) -> dict[str, Any]:
    return serializers.ngt(request, ngtemplates.get(deps.db(request), deps.caller(request), ident))


@router.patch("/{ident}", openapi_extra=schemas.body("JsonPatch"))
def update_ngt(
    request: Request, ident: str, patch: list[Any] = Depends(deps.json_patch)
) -> dict[str, Any]:
    t = ngtemplates.update(deps.db(request), deps.caller(request), ident, patch)
    return serializers.ngt(request, t)


@router.delete("/{ident}", status_code=204)
def delete_ngt(request: Request, ident: str) -> Response:
    ngtemplates.delete(deps.db(request), deps.caller(request), ident)
    return Response(status_code=204)
