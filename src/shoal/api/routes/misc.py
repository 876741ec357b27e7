"""/v1 index, stats, mservices (conductors) and quotas."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, Response

from shoal.api import deps, microversion, schemas, serializers
from shoal.domain import validation as v
from shoal.domain.errors import Invalid
from shoal.domain.fleet import Quota
from shoal.services import fleet, quotas

router = APIRouter(tags=["meta"])
public = APIRouter(tags=["meta"])  # answered to anyone: clients discover versions first
COLLECTIONS = (
    "clustertemplates",
    "clusters",
    "nodegroups",
    "nodegrouptemplates",
    "quotas",
    "certificates",
    "mservices",
    "stats",
    "providers",
    "tokens",
)


def version_entry(request: Request) -> dict[str, Any]:
    return {
        "id": "v1",
        "links": [{"href": f"{deps.base_url(request)}/v1/", "rel": "self"}],
        "status": "CURRENT",
        "min_version": microversion.fmt(microversion.MIN),
        "max_version": microversion.fmt(microversion.MAX),
    }


@public.get("")
def v1_index(request: Request) -> dict[str, Any]:
    base = deps.base_url(request)
    out: dict[str, Any] = {
        "id": "v1",
        "media_types": [
            {"base": "application/json", "type": "application/vnd.openstack.magnum.v1+json"}
        ],
        "links": [{"href": f"{base}/v1/", "rel": "self"}],
    }
    for name in COLLECTIONS:
        out[name] = [
            {"href": f"{base}/v1/{name}/", "rel": "self"},
            {"href": f"{base}/{name}/", "rel": "bookmark"},
        ]
    return out


@router.get("/stats")
def stats(request: Request) -> dict[str, Any]:
    return fleet.stats(deps.db(request), deps.caller(request))


@router.get("/mservices")
def mservices(request: Request) -> dict[str, Any]:
    items = []
    # Each conductor recorded its heartbeat period: down after 3 missed beats of its own.
    for info in fleet.mservices(deps.db(request), deps.caller(request)):
        r = info.conductor
        items.append(
            {
                "id": r.id,
                "host": r.host,
                "binary": r.binary,
                "state": info.state,
                "report_count": r.report_count,
                "disabled": r.disabled,
                "disabled_reason": r.disabled_reason,
                "created_at": serializers.ts(r.created_at),
                "updated_at": serializers.ts(r.updated_at),
            }
        )
    return {"mservices": items}


# The one resource Magnum quotas (a path naming another gets 400, as the document says).
Resource = Literal["Cluster"]


def _quota(request: Request, q: Quota) -> dict[str, Any]:
    return {
        "id": q.id,
        "project_id": q.project_id,
        "resource": q.resource,
        "hard_limit": q.hard_limit,
        "created_at": serializers.ts(q.created_at),
        "updated_at": serializers.ts(q.updated_at),
    }


@router.get("/quotas")
def list_quotas(request: Request) -> dict[str, Any]:
    rows = quotas.quota_list(deps.db(request), deps.caller(request))
    return {"quotas": [_quota(request, q) for q in rows]}


@router.post("/quotas", status_code=201, openapi_extra=schemas.body("QuotaCreate"))
def create_quota(
    request: Request, body: dict[str, Any] = Depends(deps.json_object)
) -> dict[str, Any]:
    unknown = set(body) - {"project_id", "resource", "hard_limit"}
    if unknown:
        raise Invalid(f"Unknown attribute for argument quota: {sorted(unknown)[0]}", "quota")
    project = v.required_id("project_id", body.get("project_id"))
    row = quotas.quota_set(
        deps.db(request),
        deps.caller(request),
        project,
        str(body.get("resource", "Cluster")),
        body.get("hard_limit"),
    )
    return _quota(request, row)


@router.get("/quotas/{project_id}/{resource}")
def get_quota(request: Request, project_id: str, resource: Resource) -> dict[str, Any]:
    default = deps.runtime(request).settings.quota_clusters
    row = quotas.quota_get(deps.db(request), deps.caller(request), project_id, resource, default)
    return _quota(request, row)


@router.patch(
    "/quotas/{project_id}/{resource}", status_code=202, openapi_extra=schemas.body("QuotaUpdate")
)
def update_quota(
    request: Request,
    project_id: str,
    resource: Resource,
    body: dict[str, Any] = Depends(deps.json_object),
) -> dict[str, Any]:
    caller = deps.caller(request)
    row = quotas.quota_set(deps.db(request), caller, project_id, resource, body.get("hard_limit"))
    return _quota(request, row)


@router.delete("/quotas/{project_id}/{resource}", status_code=204)
def delete_quota(request: Request, project_id: str, resource: Resource) -> Response:
    quotas.quota_delete(deps.db(request), deps.caller(request), project_id, resource)
    return Response(status_code=204)
