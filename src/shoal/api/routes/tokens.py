"""/v1/tokens (shoal, auth mode `local`): the API tokens shoal issues; an admin's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from shoal.api import deps, schemas, serializers
from shoal.domain.tokens import TokenInfo
from shoal.services import tokens

router = APIRouter(prefix="/tokens", tags=["tokens"])


def _view(request: Request, info: TokenInfo) -> dict[str, Any]:
    return {
        "uuid": info.uuid,
        "hint": info.hint,
        "project_id": info.project_id,
        "user_id": info.user_id,
        "role": info.role,
        "description": info.description,
        "created_by": info.created_by,
        "created_at": serializers.ts(info.created_at),
        "expires_at": serializers.ts(info.expires_at),
        "revoked_at": serializers.ts(info.revoked_at),
        "links": deps.links(request, f"tokens/{info.uuid}"),
    }


@router.post("", status_code=201, openapi_extra=schemas.body("TokenCreate"))
def create_token(
    request: Request, body: dict[str, Any] = Depends(deps.json_object)
) -> JSONResponse:
    """A token for `project_id` with `role` (reader, member, admin; default member),
    optionally `expires` (90d, 12h, an ISO 8601 time). The answer's `token` is shown
    this once: shoal keeps only its digest."""
    info, token = tokens.issue(deps.db(request), deps.caller(request), body)
    return JSONResponse({**_view(request, info), "token": token}, status_code=201)


@router.get("")
def list_tokens(request: Request, project_id: str | None = None) -> dict[str, Any]:
    """Every token shoal issued (of one project with `project_id`), never the tokens."""
    infos = tokens.listed(deps.db(request), deps.caller(request), project_id)
    return {"tokens": [_view(request, i) for i in infos]}


@router.delete("/{uuid}", status_code=204)
def revoke_token(request: Request, uuid: str) -> Response:
    """Revoke a token: it stops working at once here, and within the token cache's
    lifetime (SHOAL_TOKEN_CACHE_SECONDS) in other API processes."""
    tokens.revoke(deps.db(request), deps.caller(request), uuid)
    deps.runtime(request).auth.forget()
    return Response(status_code=204)
