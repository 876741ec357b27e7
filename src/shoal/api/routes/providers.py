"""/v1/providers (shoal): the clouds and hosts this deployment drives, as a conductor
last saw them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from shoal.api import deps
from shoal.services import providers
from shoal.services.providers import ProviderView

router = APIRouter(prefix="/providers", tags=["providers"])


def _configured(request: Request) -> list[providers.Configured]:
    settings = deps.runtime(request).settings
    return [
        providers.Configured(p.name, p.driver, p.name == settings.default_provider)
        for p in settings.providers
    ]


def _view(request: Request, v: ProviderView) -> dict[str, Any]:
    facts = v.facts
    out = {
        "name": v.name,
        "driver": v.driver,
        "default": v.default,
        "reachable": v.reachable,
        "checked_at": v.checked_at.isoformat() if v.checked_at else None,
        "availability_zones": facts.get("availability_zones", []),
        "flavors": facts.get("flavors", []),
        # shoal: each flavor's vcpus, ram_mb and disk_gb where the driver knows them
        "flavor_sizes": facts.get("flavor_sizes", {}),
        "images": facts.get("images", []),
        "features": facts.get("features", []),
        # What a node group may choose: option -> its values; label -> the option it sets.
        "option_choices": facts.get("option_choices", {}),
        "option_labels": facts.get("option_labels", {}),
        "links": deps.links(request, f"providers/{v.name}"),
    }
    if v.detailed:  # an admin's view
        out.update(
            reason=v.reason, checked_by=v.checked_by, nodegroups=v.nodegroups, sweeper=v.sweeper
        )
    return out


@router.get("")
def list_providers(request: Request) -> dict[str, Any]:
    """Every provider of the configuration, the default one marked."""
    views = providers.list_all(deps.db(request), deps.caller(request), _configured(request))
    return {"providers": [_view(request, v) for v in views]}


@router.get("/{name}")
def get_provider(request: Request, name: str) -> dict[str, Any]:
    view = providers.get(deps.db(request), deps.caller(request), _configured(request), name)
    return _view(request, view)
