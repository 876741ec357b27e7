"""Stepping the conductor against the real database and real sim worlds: desired
state is written by the same service functions the API calls (`shoal.services`),
passes run with `run_once()`, and the clock the conductor sees may be moved
forward (`skew`), so backoff and delays are tested without waiting."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shoal.conductor.loop import Conductor
from shoal.conductor.virthosts import StoredVirtHosts
from shoal.db import migrations
from shoal.db.engine import Database
from shoal.db.repo.paging import Page
from shoal.db.types import utcnow
from shoal.domain import model as m
from shoal.domain.errors import NotFound
from shoal.drivers.contract import TAG_NODEGROUP, Machine
from shoal.drivers.providers import Provider, Providers
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.hosted import HostedSimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from shoal.services import clusters, nodegroups, nodes, resize
from shoal.services.context import Caller
from shoal.settings import ConductorSettings, ProviderSettings
from tests.support.waiting import scaled

FAST_SIM = SimSettings(boot_seconds=0.3, delete_seconds=0.1, api_latency_ms=0, jitter=0.2)
FAST_CONDUCTOR = ConductorSettings(requeue_seconds=0.05, backoff_max_seconds=0.3)
ALL = Page(limit=100_000)


class CountingSim(SimDriver):
    """The sim driver, counting its listings by the value of one tag (`by`: by node
    group unless told)."""

    def __init__(self, world: SimWorld, by: str = TAG_NODEGROUP) -> None:
        super().__init__(world)
        self.by = by
        self.lists: Counter[str] = Counter()

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        self.lists[tags.get(self.by, "")] += 1
        return super().list_machines(tags)


@dataclass
class Env:
    """Database, sim world and a conductor whose clock a test may move forward."""

    db: Database
    world: SimWorld  # the default provider's
    conductor: Conductor
    caller: Caller = Caller("p1")
    skew: list[timedelta] = field(default_factory=lambda: [timedelta(0)])
    worlds: dict[str, SimWorld] = field(default_factory=dict)  # every provider's, by name
    names: tuple[str, ...] = ()  # every provider's name (hosted ones included)

    # -- desired state, through the services the API uses -----------------------

    def create(self, name: str, groups: list[dict[str, Any]], **attrs: Any) -> str:
        body = {"name": name, "image_id": "fedora-coreos-40", "node_groups": groups, **attrs}
        known = self.names or tuple(self.worlds) or ("sim",)
        names = m.ProviderNames(known, known[0])
        return clusters.create(self.db, self.caller, body, 20, names).uuid

    def resize(self, cid: str, group: str, count: int, remove: list[str] | None = None) -> None:
        body: dict[str, Any] = {"node_count": count, "nodegroup": group}
        if remove:
            body["nodes_to_remove"] = remove
        resize.resize_cluster(self.db, self.caller, cid, body)

    def delete(self, cid: str) -> None:
        clusters.delete(self.db, self.caller, cid)

    # -- reads, through the same services --------------------------------------

    def cluster(self, cid: str) -> m.Cluster | None:
        try:
            return clusters.get(self.db, self.caller, cid).cluster
        except NotFound:
            return None

    def group(self, cid: str, name: str) -> m.NodeGroup:
        return nodegroups.get(self.db, self.caller, cid, name).group

    def nodes(self, cid: str, group: str | None = None) -> list[m.Node]:
        """Nodes in creation order."""
        return [n for n, _, _ in nodes.list_nodes(self.db, self.caller, cid, ALL, group)]

    def servers(self, cid: str) -> list[str]:
        return sorted(s.machine_id for s in self.world.servers(cluster=cid))

    def events(self, cid: str) -> list[m.Event]:
        return nodes.list_events(self.db, self.caller, cid, 0, 10_000)

    def complete(self, cid: str) -> Callable[[], bool]:
        def done() -> bool:
            c = self.cluster(cid)
            return c is not None and c.status.endswith("COMPLETE")

        return done

    def step_until(
        self, done: Callable[[], bool], timeout: float = 30.0, skew_step: timedelta | None = None
    ) -> None:
        """Run conductor passes until `done()`; fail after `timeout` real seconds. With
        `skew_step`, the conductor's clock also moves on by that much each pass (a test
        that moved it ahead of the sim's own clock: the machines' moves then look late,
        and the group is paced as for a late move, in the conductor's time)."""
        deadline = time.monotonic() + scaled(timeout)  # stretched on a loaded machine
        while not done():
            assert time.monotonic() < deadline, "the conductor did not converge in time"
            self.conductor.run_once()
            if skew_step is not None:
                self.skew[0] += skew_step
            time.sleep(0.02)


def make_env(
    url: str,
    settings: ConductorSettings = FAST_CONDUCTOR,
    *,
    worlds: dict[str, str] | None = None,
    sim: SimSettings = FAST_SIM,
    per_group: bool = False,
    agents: bool = False,
    vms: bool = False,
    driver: Callable[[SimWorld], SimDriver] | None = None,
) -> Iterator[Env]:
    """An Env on database `url` whose providers are sim worlds (`worlds`: provider
    name -> world URL; default one provider `sim` in the same database); `agents`:
    the providers' nodes are expected to run shoal-agent; `vms`: a provider `vms` too,
    whose machines are VMs on the virt hosts of each cluster (servers of the first
    world); `driver`: how each world's driver is made (a test's own subclass)."""
    db = Database(url)
    migrations.upgrade(db)
    opened = {name: SimWorld.open(w, sim) for name, w in (worlds or {"sim": url}).items()}
    skew = [timedelta(0)]

    def now() -> datetime:
        return utcnow() + skew[0]

    def make(w: SimWorld) -> SimDriver:
        return driver(w) if driver is not None else SimDriver(w, per_group=per_group)

    made = [
        Provider(ProviderSettings(name=n, agents=agents), make(w), w) for n, w in opened.items()
    ]
    if vms:
        hosted = ProviderSettings(name="vms", options=SimSettings(hosted=True))
        hosts = StoredVirtHosts(db, next(iter(opened)))
        made.append(Provider(hosted, HostedSimDriver(next(iter(opened.values())), hosts)))
    providers = Providers(made, next(iter(opened)))
    conductor = Conductor(db, providers, settings, now=now)
    try:
        names = tuple(providers)
        yield Env(db, next(iter(opened.values())), conductor, skew=skew, worlds=opened, names=names)
    finally:
        conductor.stop()
        for w in opened.values():
            w.close()
        db.close()


# The same, as a context manager: `with env_at(url, per_group=True) as env: ...`
env_at = contextlib.contextmanager(make_env)
