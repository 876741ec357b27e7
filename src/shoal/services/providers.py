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
from shoal.domain import policy, provider_options
from shoal.domain.errors import Invalid, NotFound
from shoal.domain.model import NodeGroupSpec
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


def known_offers(db: Database) -> dict[str, provider_options.Offer]:
    """What each provider a conductor has seen reachable offers of its options (labels
    read as options, options with a closed set of values); one not checked yet is
    absent: its groups' options are taken as given and its driver checks them."""
    out: dict[str, provider_options.Offer] = {}
    for name, check in providers.latest(db).items():
        labels = check.facts.get("option_labels") or {}
        choices = check.facts.get("option_choices") or {}
        if check.reachable and (labels or choices):
            out[name] = provider_options.Offer(
                {str(k): str(x) for k, x in labels.items()},
                {str(k): tuple(str(c) for c in x) for k, x in choices.items()},
            )
    return out


def check_options(
    offers: dict[str, provider_options.Offer], name: str, spec: NodeGroupSpec
) -> None:
    """Invalid (a 400) when new group `name`'s provider options (its own, or the labels
    its provider reads as options) name a value its provider does not offer."""
    offer = offers.get(spec.provider or "")
    if offer is not None:
        where = f"node group {name}: "
        provider_options.check(
            spec.provider_options, spec.labels, offer, spec.provider or "", where
        )


def refuse_option_change(
    offers: dict[str, provider_options.Offer],
    name: str,
    before: NodeGroupSpec,
    after: NodeGroupSpec,
) -> None:
    """Invalid (a 400) when a change of group `name`'s labels would change a provider
    option it was made with (the heat driver's template: its stack keeps the one it
    was made from)."""
    offer = offers.get(before.provider or "")
    if offer is None:
        return
    labels = provider_options.changed_labels(
        before.provider_options, before.labels, after.labels, offer.labels
    )
    if labels:
        opts = ", ".join(offer.labels[label] for label in labels)
        raise Invalid(
            f"node group {name}: the label {', '.join(labels)} sets the provider option "
            f"{opts}, chosen when the group was made; it cannot change (make a new node "
            "group with the new value and move the workload)",
            "labels",
        )
