"""What every reconciler of one conductor process shares: the database, the
providers (each with its driver and the limits on calls to it), the bounded pool
of driver calls, backoff and clock.

Limits are keyed by provider and, for a driver whose zones are targets (one
libvirt host each), by zone as well: a rate limiter and a learned create pace
per provider, and a bound on concurrent calls per provider and per target.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from shoal.conductor.backoff import Backoff
from shoal.conductor.delegations import StoredDelegations
from shoal.conductor.kubeapi import KubeAccess
from shoal.conductor.pacing import CREATE_SLOT_WAIT_MAX_S, Pacing
from shoal.conductor.priors import MoveTimes
from shoal.conductor.ratelimit import RateLimiter
from shoal.conductor.throttle import Held, Throttle
from shoal.db.engine import Database
from shoal.db.snapshots import GroupPlace
from shoal.domain.bootstrap import ClusterSecrets
from shoal.drivers.contract import Capabilities, Driver, Feature, TransientError
from shoal.drivers.providers import Providers
from shoal.settings import ConductorSettings

T = TypeVar("T")
GROUP_PROVIDERS_MAX = 100_000


class CreateRefused(TransientError):
    """A create the provider's rate limit refused (a 429 with a hint), or that its
    throttle holds for longer than a worker waits: not a failure. Its group's pass ends
    with the group due again after `retry_after` seconds."""


@dataclass
class Provider:
    """One provider as the conductor calls it: its driver and the limits on its calls."""

    name: str
    driver: Driver
    limiter: RateLimiter
    slots: threading.BoundedSemaphore  # concurrent calls to this provider
    per_target: int | None = None  # concurrent calls per target (zones that are hosts)
    agents: bool = False  # its nodes run shoal-agent (a silent one is unhealthy)
    # Its nodes run the Kubernetes shoal renders (the driver says a cluster's API address
    # before its first master exists: conductor/nodegroup/kube.py), so shoal reads its
    # clusters' API servers (conductor/nodegroup/kubefeed.py).
    kubernetes: bool = False
    # Creates: paced to the provider's limit as learned from its 429s.
    create_throttle: Throttle = field(default_factory=Throttle)
    # What its machines took lately, by flavor: how a group that has learned nothing is paced.
    moves: MoveTimes = field(default_factory=MoveTimes)
    _targets: dict[str, threading.BoundedSemaphore] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def capabilities(self) -> Capabilities:
        return self.driver.capabilities()

    @property
    def hosted(self) -> bool:
        """Its machines are VMs on the virt hosts of each cluster (feature HOSTED)."""
        return self.has(Feature.HOSTED)

    def has(self, feature: Feature) -> bool:
        return self.capabilities().has(feature)

    def target_of(self, zone: str | None) -> str | None:
        """The target a call about a machine in `zone` goes to (None: the provider)."""
        if zone is None or self.per_target is None:
            return None
        return zone if self.capabilities().zones_are_targets else None

    @contextlib.contextmanager
    def slot(self, target: str | None) -> Iterator[None]:
        """Hold one of the provider's concurrent calls (and one of the target's)."""
        with self.slots:
            if target is None or self.per_target is None:
                yield
                return
            with self._lock:
                sem = self._targets.setdefault(target, threading.BoundedSemaphore(self.per_target))
            with sem:
                yield


@dataclass
class Context:
    """Long-lived handles passed to every pass (no globals)."""

    db: Database
    providers: dict[str, Provider]
    default_provider: str
    settings: ConductorSettings
    pool: ThreadPoolExecutor
    backoff: Backoff
    now: Callable[[], datetime]
    holder: str  # this process's lease holder name; every pass's write is fenced by it
    api_url: str = "http://127.0.0.1:9511"  # shoal's API, as nodes are told to reach it
    # Node uuid -> its agent's token (domain.sealing.Sealer.node_token); None: no agent.
    node_token: Callable[[str], str] | None = None
    # Clusters' delegated credentials (Keystone trusts): removed when a cluster goes.
    delegations: StoredDelegations | None = None
    # Cluster uuid -> its Kubernetes secrets (conductor/kube_secrets.py); None: nodes
    # get no Kubernetes bootstrap.
    kube_secrets: Callable[[str], ClusterSecrets] | None = None
    # Clients of the clusters' Kubernetes API servers (None: shoal reads none).
    kube: KubeAccess | None = None
    # Where each node group seen lives (provider, cluster, project: fixed at its
    # creation, so never stale): a pass needs it before it lists, and a read per pass
    # costs more than the pass.
    group_places: dict[str, GroupPlace] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        db: Database,
        providers: Providers,
        settings: ConductorSettings,
        *,
        now: Callable[[], datetime],
        holder: str,
        api_url: str,
        node_token: Callable[[str], str] | None = None,
        delegations: StoredDelegations | None = None,
        kube_secrets: Callable[[str], ClusterSecrets] | None = None,
    ) -> Context:
        """A context over `providers`, each with the limits its settings ask for."""
        calls: dict[str, Provider] = {}
        for name, p in providers.items():
            rate = p.settings.rate_per_s
            calls[name] = Provider(
                name=name,
                driver=p.driver,
                limiter=RateLimiter(settings.driver_rate_per_s if rate is None else rate),
                slots=threading.BoundedSemaphore(
                    p.settings.concurrency or settings.driver_concurrency
                ),
                per_target=p.settings.concurrency_per_target,
                agents=p.settings.agents or bool(getattr(p.settings.options, "agents", False)),
                kubernetes=getattr(p.driver, "reserve_address", None) is not None,
            )
        return cls(
            db=db,
            providers=calls,
            default_provider=providers.default,
            settings=settings,
            pool=ThreadPoolExecutor(settings.driver_concurrency, thread_name_prefix="driver"),
            backoff=Backoff(base=1.0, cap=settings.backoff_max_seconds),
            now=now,
            holder=holder,
            api_url=api_url,
            node_token=node_token,
            delegations=delegations,
            kube_secrets=kube_secrets,
            kube=(
                KubeAccess(kube_secrets, now, settings.kube_timeout_seconds)
                if kube_secrets is not None
                else None
            ),
        )

    def places_of(
        self, uuids: list[str], read: Callable[[list[str]], dict[str, GroupPlace]]
    ) -> dict[str, GroupPlace]:
        """Where each group of `uuids` that exists lives, its provider named (the
        default one for a group that names none); `read` looks up those not
        remembered yet."""
        known = self.group_places
        missing = [u for u in uuids if u not in known]
        if missing:
            if len(known) > GROUP_PROVIDERS_MAX:
                known.clear()  # bounded; refilled on demand
            for u, place in read(missing).items():
                known[u] = replace(place, provider=place.provider or self.default_provider)
        return {u: known[u] for u in uuids if u in known}

    def provider(self, name: str | None) -> Provider | None:
        """The provider `name` (None: the default one); None when it is not configured."""
        return self.providers.get(name or self.default_provider)

    def call(self, p: Provider, fn: Callable[[], T], zone: str | None = None) -> T:
        """One driver call through the provider's limits; a 429 hint holds every caller."""
        with p.slot(p.target_of(zone)):
            p.limiter.acquire()
            try:
                return fn()
            except TransientError as exc:
                if exc.retry_after:
                    p.limiter.hold(exc.retry_after)
                raise

    def create(self, p: Provider, fn: Callable[[], T], zone: str | None = None) -> T:
        """One create call paced by the provider's throttle. A refusal with a
        retry-after hint (429), or a slot further than `CREATE_SLOT_WAIT_MAX_S`, is
        `CreateRefused`: the throttle learns from it, and the pass ends with its group
        due again when the hint says (no worker thread waits for it)."""
        try:
            p.create_throttle.acquire(CREATE_SLOT_WAIT_MAX_S)
        except Held as held:
            raise CreateRefused(
                f"provider {p.name} takes no create for {held.seconds:.3g} s (its rate limit)",
                held.seconds,
            ) from None
        try:
            out = self.call(p, fn, zone)
        except TransientError as exc:
            if exc.retry_after is None:
                raise
            p.create_throttle.refused(exc.retry_after)
            raise CreateRefused(exc.reason, exc.retry_after) from exc
        p.create_throttle.accepted()
        return out

    @property
    def pacing(self) -> Pacing:
        """This conductor's clock, periods and backoff, as the outcome phases take them."""
        return Pacing.of(self.settings, self.backoff, self.now)

    def pacing_for(self, name: str | None, flavor: str | None = None) -> Pacing:
        """The pacing of a group in provider `name`: its floor is its driver's pace, and
        a group of `flavor` that has learned nothing expects what that flavor's machines
        of the provider took lately."""
        p = self.provider(name)
        if p is None:
            return self.pacing
        return self.pacing.for_provider(p.capabilities().pace_seconds, *p.moves.priors(flavor))

    def requeue_at(self, now: datetime, seconds: float) -> datetime:
        """`now + seconds`, jittered by the backoff's jitter."""
        return self.pacing.at(now, seconds)
