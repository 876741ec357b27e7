"""/v1/clustertemplates: Magnum's cluster templates (may embed node group templates)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from shoal.api import deps, schemas, serializers
from shoal.services import templates

router = APIRouter(prefix="/clustertemplates", tags=["clustertemplates"])


@router.get("")
def list_templates(request: Request) -> dict[str, Any]:
    pg = deps.page(request)
    items = templates.list_page(deps.db(request), deps.caller(request), pg)
    return deps.collection(
        request, "clustertemplates", [serializers.cluster_template(request, t) for t in items], pg
    )


@router.get("/detail")
def list_detail(request: Request) -> dict[str, Any]:
    return list_templates(request)


@router.post("", status_code=201, openapi_extra=schemas.body("ClusterTemplateCreate"))
def create_template(
    request: Request, response: Response, body: dict[str, Any] = Depends(deps.json_object)
) -> dict[str, Any]:
    """From attributes, or `from_cluster` (+ overrides); `node_group_templates` embeds NGTs."""
    ct = templates.create(deps.db(request), deps.caller(request), body)
    obj = serializers.cluster_template(request, ct)
    response.headers["Location"] = obj["links"][0]["href"]
    return obj


@router.get("/{ident}")
def get_template(request: Request, ident: str) -> dict[str, Any]:
    ct = templates.get(deps.db(request), deps.caller(request), ident)
    return serializers.cluster_template(request, ct)


@router.patch("/{ident}", openapi_extra=schemas.body("JsonPatch"))
def update_template(
    request: Request, ident: str, patch: list[Any] = Depends(deps.json_patch)
) -> dict[str, Any]:
    ct = templates.update(deps.db(request), deps.caller(request), ident, patch)
    return serializers.cluster_template(request, ct)


@router.delete("/{ident}", status_code=204)
def delete_template(request: Request, ident: str) -> Response:
    templates.delete(deps.db(request), deps.caller(request), ident)
    return Response(status_code=204)
