"""The node agent's API (shoal), `/v1/agent/...`: each node authenticates with its own
token (X-Shoal-Node-Token, derived from the deployment's key), not with a user's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from shoal.agent import protocol
from shoal.api import deps, schemas
from shoal.services import operations

router = APIRouter(tags=["operations"])


@router.post("/agent/heartbeat", openapi_extra=schemas.body("AgentHeartbeat"))
def agent_heartbeat(
    request: Request, body: dict[str, Any] = Depends(deps.json_object)
) -> dict[str, Any]:
    """The node agent: alive; answers the task to run now (docs/agent.md)."""
    token = request.headers.get(protocol.TOKEN_HEADER)
    interval = deps.runtime(request).settings.agent_interval_seconds
    return operations.heartbeat(deps.db(request), deps.sealer(request), token, body, interval)


@router.post("/agent/tasks/{uuid}", openapi_extra=schemas.body("AgentReport"))
def agent_report(
    request: Request, uuid: str, body: dict[str, Any] = Depends(deps.json_object)
) -> dict[str, Any]:
    """The node agent: a task's progress or end."""
    token = request.headers.get(protocol.TOKEN_HEADER)
    operations.report(deps.db(request), deps.sealer(request), token, uuid, body)
    return {}
