"""Providers as the API shows them: what the configuration names, and what a
conductor last saw of each (reachable or not and why, zones, flavors, images).
The API never calls a cloud: conductors check the providers and record it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shoal.db import providers
from shoal.db.engine import Database
from shoal.db.repo import nodegroups
from shoal.domain import policy
from shoal.domain.errors import NotFound
from shoal.services.context import Caller


@dataclass(frozen=True)
class Configured:
    """A provider as the deployment's configuration names it."""

    name: str
    driver: str
    default: bool


@dataclass(frozen=True)
class ProviderView:
    """A configured provider with its last check and how many node groups use it."""

    name: str
    driver: str
    default: bool
    checked: bool
    reachable: bool | None
    reason: str | None
    facts: dict[str, Any]
    checked_at: datetime | None
    checked_by: str | None
    nodegroups: int
    sweeper: str | None = None  # why the sweeper stopped deleting its machines, if it did
    detailed: bool = True  # an admin's view: reason, checker, sweeper, node groups


def list_all(db: Database, caller: Caller, configured: Sequence[Configured]) -> list[ProviderView]:
    """Every configured provider, in the configuration's order. Anyone may see what a
    node group can choose (names, reachable, zones, flavors, images); why a provider
    is unreachable, who checked it, its sweeper and its use over every project are the
    deployment's business (`provider:detail`)."""
    policy.enforce(caller, "provider:get")
    detailed = policy.allowed(caller, "provider:detail")
    checks = providers.latest(db)
    with db.read() as s:
        used = nodegroups.count_by_provider(s, {c.name for c in configured if c.default})
    out = []
    for c in configured:
        seen = checks.get(c.name)
        out.append(
            ProviderView(
                name=c.name,
                driver=c.driver,
                default=c.default,
                checked=seen is not None,
                reachable=seen.reachable if seen else None,
                reason=seen.reason if seen else "not checked yet: no conductor has run",
                facts=dict(seen.facts) if seen else {},
                checked_at=seen.checked_at if seen else None,
                checked_by=seen.checked_by if seen else None,
                nodegroups=used.get(c.name, 0),
                sweeper=seen.sweeper if seen else None,
                detailed=detailed,
            )
        )
    return out


def get(db: Database, caller: Caller, configured: Sequence[Configured], name: str) -> ProviderView:
    for view in list_all(db, caller, configured):
        if view.name == name:
            return view
    raise NotFound("Provider", name)


def known_zones(db: Database) -> dict[str, list[str]]:
    """The zones of each provider a conductor has seen reachable with zones (the API
    never asks a cloud); a provider not checked yet is absent: its zones are unknown."""
    out: dict[str, list[str]] = {}
    for name, check in providers.latest(db).items():
        zones = list(check.facts.get("availability_zones") or [])
        if check.reachable and zones:
            out[name] = [str(z) for z in zones]
    return out
