"""The composition root: build every long-lived part of a shoal process from
one Settings object, in one place. Entry points (cli `serve`, `conductor`,
tests) call `build_runtime`; nothing else constructs engines or drivers."""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from shoal.auth.base import Authenticator
from shoal.db.engine import Database
from shoal.drivers.providers import Companion, Providers
from shoal.settings import Settings, SettingsError

log = logging.getLogger(__name__)
PRESENCE_SECONDS = 5.0  # how often a process without a conductor says it is alive


class Conductor(Protocol):
    """A conductor (`shoal.conductor.loop.Conductor`): imported only when built."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def wake(self) -> None: ...


@dataclass
class Runtime:
    """Handles shared by the API app and the conductor of one process."""

    settings: Settings
    db: Database
    providers: Providers
    auth: Authenticator  # who makes each API request
    conductor: Conductor | None = None  # when this process runs one
    agents: list[Companion] = field(default_factory=list)  # what providers run beside
    _presence: threading.Event = field(default_factory=threading.Event)
    _presence_thread: threading.Thread | None = None

    @property
    def sim(self) -> Any | None:
        """The world of the first sim provider (the /v1/sim admin API's default)."""
        return self.providers.sim_world()

    def start(self) -> None:
        """Start the conductor; a process without one reports that it is alive (in
        the process registry), so that `shoal db migrate` knows it runs."""
        for emulation in self.agents:
            emulation.start()
        if self.conductor is not None:
            self.conductor.start()
        elif self._presence_thread is None:
            self._presence.clear()
            self._presence_thread = threading.Thread(
                target=self._report, name="presence", daemon=True
            )
            self._presence_thread.start()

    def close(self) -> None:
        for emulation in self.agents:
            emulation.stop()
        if self.conductor is not None:
            self.conductor.stop()
        if self._presence_thread is not None:
            self._presence.set()
            self._presence_thread.join(timeout=10)
            self._presence_thread = None
            self._gone()
        self.providers.close()
        self.auth.close()
        self.db.close()

    @property
    def host(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def _report(self) -> None:
        from shoal.db import registry
        from shoal.db.types import utcnow

        while True:
            try:
                with self.db.core_write() as s:
                    registry.report_alive(s, self.host, utcnow(), PRESENCE_SECONDS, registry.API)
            except Exception:  # the database is away: say so, try again next period
                log.warning("could not report this process alive", exc_info=True)
            if self._presence.wait(PRESENCE_SECONDS):
                return

    def _gone(self) -> None:
        from shoal.db import registry

        try:
            registry.report_gone(self.db, self.host, registry.API)
        except Exception:  # it will look dead once its last report is old
            log.warning("could not report this process gone", exc_info=True)


def build_runtime(settings: Settings, *, with_conductor: bool | None = None) -> Runtime:
    """Open the database (applying migrations), the providers' drivers and, if asked,
    the conductor.

    `with_conductor` defaults to `settings.conductor`. The conductor is built
    but not started; `Runtime.start()` starts it.
    """
    from shoal.db import deployment_state, migrations
    from shoal.db.engine import Database
    from shoal.drivers import providers as drivers

    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.db_url, settings.database_pool_max)
    migrations.upgrade(db)
    unfinished = deployment_state.unfinished_copy(db)
    if unfinished is not None:  # half the rows: serving it would replace the machines
        db.close()
        raise SettingsError(
            f"this database is an unfinished copy ({unfinished}); run the same "
            "`shoal db migrate --to ...` again to finish it, then start shoal"
        )
    from shoal import auth, keys
    from shoal.conductor.delegations import StoredDelegations
    from shoal.conductor.virthosts import StoredVirtHosts

    try:
        authenticator = auth.build(settings, db)
    except BaseException:
        db.close()
        raise
    # Clusters' Keystone trusts: read (and unsealed) by the drivers that act with them,
    # removed from Keystone when their cluster goes.
    sealer = functools.cache(lambda: keys.load(settings))  # read once, when first needed
    delegations = StoredDelegations(db, sealer, authenticator.undelegate)
    virt_hosts = StoredVirtHosts(db, settings.default_provider)
    try:
        providers = drivers.build(settings, delegations, virt_hosts)
    except BaseException:
        authenticator.close()
        db.close()
        raise
    runtime = Runtime(settings=settings, db=db, providers=providers, auth=authenticator)
    api_url = settings.api_url
    if settings.conductor if with_conductor is None else with_conductor:
        from shoal.conductor.kube_secrets import KubeSecrets
        from shoal.conductor.loop import Conductor

        # node agents' tokens derive from the deployment's key
        runtime.conductor = Conductor(
            db,
            providers,
            settings.conductor_settings,
            api_url=api_url,
            node_token=sealer().node_token,
            delegations=delegations,
            kube_secrets=KubeSecrets(db, sealer),
        )
    runtime.agents = [c for p in providers.values() for c in p.companions]
    from shoal.db import notify

    # Every desired-state commit wakes conductors: NOTIFY on PostgreSQL, and
    # this process's own conductor directly (the embedded SQLite setup).
    notify.install(db, runtime.conductor.wake if runtime.conductor is not None else None)
    return runtime
