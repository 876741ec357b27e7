"""Admin endpoints of the sim cloud (`/v1/sim/...`): servers, config, quotas, faults, reset;
an admin's (policy `sim:admin`).

For tests and demos: they act on the SimWorld of a sim provider of this process
(`?provider=NAME`; the first sim provider by default), which stores everything in
the sim tables, so every process on the same world sees the changes. When no sim
provider has that name they answer 409.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from shoal.api import deps
from shoal.domain.errors import Conflict, Invalid, NotFound
from shoal.domain.validation import INT_MAX

router = APIRouter(prefix="/sim", tags=["sim"], dependencies=[deps.require("sim:admin")])

# Counts and sizes the sim stores in INTEGER columns: bounded like every other integer.
Count = Annotated[int, Field(ge=0, le=INT_MAX)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuotaBody(_Body):
    instances: Count | None = None
    cores: Count | None = None
    ram_mb: Count | None = None


class ConfigPatch(_Body):
    seed: int | None = None
    time_scale: float | None = Field(None, ge=0.001, le=1_000_000)
    boot_seconds: float | None = Field(None, ge=0)
    delete_seconds: float | None = Field(None, ge=0)
    api_latency_ms: float | None = Field(None, ge=0)
    jitter: float | None = Field(None, ge=0, le=1)
    rate_limit_per_s: float | None = Field(None, ge=0)
    rate_limit_burst_s: float | None = Field(None, ge=0, le=86_400)
    availability_zones: list[str] | None = None
    az_capacity_cores: dict[str, Count] | None = None
    default_quota: QuotaBody | None = None


class FaultBody(_Body):
    kind: Literal[
        "quota_exceeded",
        "no_valid_host",
        "no_valid_host_async",
        "server_error",
        "transient",
        "delete_fails_once",
        "driver_bug",
    ]
    op: Literal["create", "delete", "list", "reboot", "rebuild", "any"] | None = None
    az: str | None = None
    cluster: str | None = None
    nodegroup: str | None = None
    flavor: str | None = None
    count: Count | None = None
    probability: float = Field(1.0, ge=0, le=1)
    message: str | None = None
    status: int | None = Field(None, ge=100, le=599)
    retry_after: float | None = Field(None, ge=0, le=86_400)


# The states a sim server may be in (the driver contract's MachineState).
STATES = ("BUILDING", "ACTIVE", "ERROR", "DELETING")


def _world(request: Request) -> Any:
    """The world of the sim provider named by `?provider=` (default: the first one)."""
    runtime = getattr(request.app.state, "runtime", None)
    name = request.query_params.get("provider")
    world = runtime.providers.sim_world(name) if runtime is not None else None
    if world is None:
        which = f"no sim provider is named {name!r}" if name else "no provider uses the sim"
        raise Conflict(f"{which}; the sim admin API acts on sim providers only")
    return world  # the world, or its proxy when it runs in its own process


def _server(world: Any, machine_id: str) -> Any:
    """The sim server `machine_id` (404 when the world has none)."""
    found = next((s for s in world.servers() if s.machine_id == machine_id), None)
    if found is None:
        raise NotFound("Server", machine_id)
    return found


@router.get("/servers")
def list_servers(
    request: Request,
    cluster: str | None = None,
    nodegroup: str | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    """Every server of the sim cloud, optionally filtered by cluster, node group or state."""
    if state is not None and state not in STATES:
        raise Invalid(f"state must be one of {', '.join(STATES)}", field="state")
    servers = _world(request).servers(cluster=cluster, nodegroup=nodegroup, state=state)
    return {"servers": [s.as_dict() for s in servers]}


@router.get("/servers/{machine_id}")
def get_server(request: Request, machine_id: str) -> dict[str, Any]:
    """One server; a VM of a virt host with its host and the domain XML it was made with."""
    world = _world(request)
    out: dict[str, Any] = _server(world, machine_id).as_dict()
    xml = world.domain_xml(machine_id)
    if xml is not None:
        out["domain_xml"] = xml
    return out


@router.delete("/servers/{machine_id}", status_code=204)
def lose_server(request: Request, machine_id: str) -> Response:
    """The cloud loses a server behind shoal's back (a dead host, an operator's delete
    outside shoal); a virt host's VMs go with it. shoal finds out from its listings."""
    world = _world(request)
    world.delete(_server(world, machine_id).machine_id)
    return Response(status_code=204)


@router.get("/config")
def get_config(request: Request) -> dict[str, Any]:
    config: dict[str, Any] = _world(request).config()
    return config


@router.patch("/config")
def patch_config(request: Request, body: ConfigPatch) -> dict[str, Any]:
    """Change latencies, time scale, rate limit, jitter, zones or capacity; seen by all."""
    changes = body.model_dump(exclude_unset=True, exclude_none=True)
    config: dict[str, Any] = _world(request).patch_config(changes)
    return config


@router.get("/quotas/{project_id}")
def get_quota(request: Request, project_id: str) -> dict[str, Any]:
    quota: dict[str, Any] = _world(request).quota(project_id)
    return quota


@router.put("/quotas/{project_id}")
def put_quota(request: Request, project_id: str, body: QuotaBody) -> dict[str, Any]:
    """Set a project's limits; resources left out keep their current limit."""
    quota: dict[str, Any] = _world(request).set_quota(
        project_id, body.model_dump(exclude_none=True)
    )
    return quota


@router.get("/faults")
def list_faults(request: Request) -> dict[str, Any]:
    return {"faults": _world(request).faults()}


@router.post("/faults", status_code=201)
def add_fault(request: Request, body: FaultBody) -> dict[str, Any]:
    """Add a fault rule; the answer carries its id."""
    rule: dict[str, Any] = _world(request).add_fault(body.model_dump(exclude_unset=True))
    return rule


@router.delete("/faults/{fault_id}", status_code=204)
def delete_fault(request: Request, fault_id: Annotated[int, Path(ge=0, le=INT_MAX)]) -> Response:
    _world(request).delete_fault(fault_id)
    return Response(status_code=204)


@router.delete("/faults", status_code=204)
def clear_faults(request: Request) -> Response:
    _world(request).clear_faults()
    return Response(status_code=204)


@router.post("/reset", status_code=204)
def reset(request: Request) -> Response:
    """Empty the world: no servers, quotas or faults; config back to the settings."""
    _world(request).reset()
    return Response(status_code=204)
