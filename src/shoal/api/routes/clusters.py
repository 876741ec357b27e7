"""/v1/clusters: create (four paths), list, show, update, delete, resize, upgrade,
and shoal's /nodes and /events under a cluster."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from shoal.api import deps, schemas, serializers
from shoal.domain import validation
from shoal.domain.errors import Invalid
from shoal.services import clusters, nodes, resize, rollouts

router = APIRouter(prefix="/clusters", tags=["clusters"])


def _accepted(uuid: str) -> JSONResponse:
    return JSONResponse({"uuid": uuid}, status_code=202)


def _list(request: Request, detail: bool) -> dict[str, Any]:
    pg = deps.page(request)
    if detail:
        caller = deps.caller(request)
        views = [
            clusters.get(deps.db(request), caller, c.cluster.uuid)
            for c in clusters.list_page(deps.db(request), caller, pg)
        ]
    else:
        views = clusters.list_page(deps.db(request), deps.caller(request), pg)
    items = [serializers.cluster(request, v, detail=detail) for v in views]
    return deps.collection(request, "clusters", items, pg)


@router.get("")
def list_clusters(request: Request) -> Response:
    return deps.json_response(_list(request, detail=False))


@router.get("/detail")
def list_detail(request: Request) -> Response:
    return deps.json_response(_list(request, detail=True))


@router.post("", status_code=202, openapi_extra=schemas.body("ClusterCreate"))
def create_cluster(
    request: Request, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """All attributes; `cluster_template_id`; `from_cluster`; either plus overrides."""
    settings = deps.runtime(request).settings
    caller = deps.caller(request)
    with deps.delegation(request, caller) as credential:
        c = clusters.create(
            deps.db(request),
            caller,
            body,
            settings.quota_clusters,
            deps.provider_names(request),
            credential=credential,
        )
    return _accepted(c.uuid)


@router.get("/{ident}")
def get_cluster(request: Request, ident: str) -> Response:
    view = clusters.get(deps.db(request), deps.caller(request), ident)
    return deps.json_response(serializers.cluster(request, view))


@router.patch("/{ident}", status_code=202, openapi_extra=schemas.body("JsonPatch"))
def update_cluster(
    request: Request, ident: str, patch: list[Any] = Depends(deps.json_patch)
) -> JSONResponse:
    c = clusters.update(deps.db(request), deps.caller(request), ident, patch)
    return _accepted(c.uuid)


@router.delete("/{ident}", status_code=204)
def delete_cluster(request: Request, ident: str) -> Response:
    clusters.delete(deps.db(request), deps.caller(request), ident)
    return Response(status_code=204)


@router.post("/{ident}/actions/resize", status_code=202, openapi_extra=schemas.body("Resize"))
def resize_cluster(
    request: Request, ident: str, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """node_count, nodes_to_remove (uuids, names, addresses, indexes), nodegroup."""
    deps.need(request, 1, 7, "resize")
    return _accepted(resize.resize_cluster(deps.db(request), deps.caller(request), ident, body))


@router.post("/{ident}/actions/upgrade", status_code=202, openapi_extra=schemas.body("Upgrade"))
def upgrade_cluster(
    request: Request, ident: str, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """cluster_template, max_batch_size, nodegroup: a rollout to the template's image."""
    deps.need(request, 1, 7, "upgrade")
    return _accepted(resize.upgrade_cluster(deps.db(request), deps.caller(request), ident, body))


def _hold(action: str) -> Any:
    def route(
        request: Request, ident: str, body: dict[str, Any] = Depends(deps.json_object)
    ) -> JSONResponse:
        return _accepted(rollouts.hold(deps.db(request), deps.caller(request), ident, action, body))

    route.__name__ = f"{action}_rollout"
    route.__doc__ = f"shoal: {action} the rollout of the cluster's node groups (or of `nodegroup`)."
    return route


for _action in rollouts.HOLDS:
    router.post(
        f"/{{ident}}/actions/{_action}",
        status_code=202,
        openapi_extra=schemas.body("RolloutHold"),
    )(_hold(_action))


@router.get("/{ident}/nodes")
def list_nodes(request: Request, ident: str, nodegroup: str | None = None) -> Response:
    """shoal: the nodes of a cluster (optionally of one node group), paginated."""
    pg = deps.page(request)
    rows = nodes.list_nodes(deps.db(request), deps.caller(request), ident, pg, nodegroup)
    items = [serializers.node(request, n, g, r) for n, g, r in rows]
    path = f"clusters/{ident}/nodes"
    return deps.json_response(deps.collection(request, "nodes", items, pg, path=path))


@router.get("/{ident}/events")
def list_events(request: Request, ident: str) -> dict[str, Any]:
    """shoal: the cluster's events oldest first; `after` = last event id seen (for --follow)."""
    q = request.query_params
    after = validation.integer("after", q.get("after") or 0, lo=0)
    try:
        limit = int(q.get("limit") or 1000)
    except ValueError as exc:
        raise Invalid("limit must be an integer", "limit") from exc
    if limit <= 0:
        raise Invalid("Limit must be positive", "limit")
    limit = min(limit, deps.runtime(request).settings.page_limit)
    evs = nodes.list_events(deps.db(request), deps.caller(request), ident, after, limit)
    return {"events": [serializers.event(e) for e in evs]}
