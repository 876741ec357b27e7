"""The world's storage core: engine, transactions, and a per-process cache of config.

Config, quotas and fault rules change rarely and are read on every call, so each
process caches them and reloads only when the `version` in `sim_meta` moved (one
primary-key read per call). Servers and usage are never cached: they are the
shared state several processes write.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, Self

from sqlalchemy import Connection, Engine, delete, insert, inspect, select, text, update
from sqlalchemy.exc import OperationalError, ProgrammingError

from shoal.drivers.sim import engine as sim_engine
from shoal.drivers.sim import tables
from shoal.drivers.sim.clock import Clock, SystemClock
from shoal.drivers.sim.config import SETTINGS_FIELDS, Quota, SimConfig
from shoal.drivers.sim.faults import FaultKind, FaultRule, Op
from shoal.drivers.sim.settings import SimSettings


class Snapshot(NamedTuple):
    """What a process caches of one world version."""

    version: int
    config: SimConfig
    quotas: Mapping[str, Quota]
    faults: tuple[FaultRule, ...]


class WorldStore:
    """Owns the engine and the cache; the world's operations build on it."""

    def __init__(self, engine: Engine, settings: SimSettings, clock: Clock) -> None:
        self._engine = engine
        self._settings = settings
        self._clock = clock
        url = engine.url.render_as_string(hide_password=False)
        self._sqlite = sim_engine.is_sqlite(url)
        self._memory = sim_engine.is_memory(url)
        # SQLite has one writer at a time anyway; queueing our own threads on a
        # Python lock is much cheaper than letting them spin on busy_timeout.
        self._wlock = threading.Lock()
        self._snap: Snapshot | None = None
        self._ops: dict[str, int] = {}  # API calls by kind (SimWorld.api_calls)

    @classmethod
    def open(
        cls, url: str, settings: SimSettings | None = None, clock: Clock | None = None
    ) -> Self:
        """Open (creating its tables if needed) the world stored at SQLAlchemy `url`."""
        settings = settings or SimSettings()
        engine = sim_engine.make_engine(url, settings.database_pool_max)
        world = cls(engine, settings, clock or SystemClock())
        world._create_tables()
        with world._txn(write=True) as conn:
            world._init_meta(conn)
            # user data whose server row is gone (a world written before user data went
            # with its row): it would block that id's next create
            ud, servers = tables.user_data, tables.servers
            conn.execute(delete(ud).where(ud.c.machine_id.not_in(select(servers.c.machine_id))))
        return world

    def close(self) -> None:
        """Release the database connections."""
        self._engine.dispose()

    def now(self) -> float:
        """Simulated seconds since the epoch, as every process on this world sees them."""
        return self.snapshot().config.sim_now(self._clock.now())

    def cached(self) -> Snapshot:
        """The last snapshot this process loaded, without I/O (loads it the first time)."""
        return self._snap or self.snapshot()

    def snapshot(self) -> Snapshot:
        """The current config, quotas and fault rules (cached while unchanged)."""
        with self._txn(write=False) as conn:
            return self._load(conn)

    @contextlib.contextmanager
    def _txn(self, write: bool) -> Iterator[Connection]:
        lock: Any = self._wlock if (write and self._sqlite) or self._memory else _NOLOCK
        with lock, self._engine.connect() as conn:
            if write:
                conn.execution_options(**sim_engine.WRITE)
            with conn.begin():
                yield conn

    def _create_tables(self) -> None:
        for attempt in range(3):  # two processes creating at once: the loser retries
            try:
                with self._txn(write=True) as conn:
                    tables.metadata.create_all(conn)
                    _add_role_column(conn)
                return
            except (OperationalError, ProgrammingError):
                if attempt == 2:
                    raise

    def _load(self, conn: Connection) -> Snapshot:
        m = tables.meta
        version = conn.execute(_VERSION).scalar_one()
        snap = self._snap
        if snap is not None and snap.version == version:
            return snap
        raw = conn.execute(select(m.c.config).where(m.c.id == 1)).scalar_one()
        q = tables.quotas
        quotas = {r.project: Quota(r.instances, r.cores, r.ram_mb) for r in conn.execute(select(q))}
        f = tables.faults
        rules = tuple(_rule(r) for r in conn.execute(select(f).order_by(f.c.id)))
        snap = Snapshot(version, SimConfig.from_json(raw), quotas, rules)
        self._snap = snap
        return snap

    def _init_meta(self, conn: Connection) -> None:
        """First open: store the config from settings. Later opens with different
        settings: those settings win (a restart with new SHOAL_SIM_* takes effect)."""
        m = tables.meta
        row = conn.execute(select(m).where(m.c.id == 1)).first()
        wall = self._clock.now()
        if row is None:
            cfg = SimConfig.from_settings(self._settings, wall)
            conn.execute(
                insert(m).values(
                    id=1,
                    version=1,
                    config=cfg.to_json(),
                    opened_with=self._opened_with(),
                    bucket_tokens=cfg.rate_burst,
                    bucket_at=cfg.sim_now(wall),
                )
            )
            return
        if row.opened_with != self._opened_with():
            cfg = SimConfig.from_json(row.config)
            new = cfg.patched({k: getattr(self._settings, k) for k in SETTINGS_FIELDS}, wall)
            self._store_config(conn, new)

    def _opened_with(self) -> str:
        return repr(tuple(getattr(self._settings, k) for k in SETTINGS_FIELDS))

    def _store_config(self, conn: Connection, cfg: SimConfig) -> None:
        """Save `cfg`, refill the rate bucket, and make every process reload."""
        self._snap = None
        m = tables.meta
        conn.execute(
            update(m)
            .where(m.c.id == 1)
            .values(
                config=cfg.to_json(),
                opened_with=self._opened_with(),
                version=m.c.version + 1,
                bucket_tokens=cfg.rate_burst,
                bucket_at=cfg.sim_now(self._clock.now()),
            )
        )

    def _bump(self, conn: Connection) -> None:
        """Make every process reload its cache (after a quota or fault change)."""
        self._snap = None
        m = tables.meta
        conn.execute(update(m).where(m.c.id == 1).values(version=m.c.version + 1))


def _rule(r: Any) -> FaultRule:
    return FaultRule(
        id=r.id,
        kind=FaultKind(r.kind),
        op=Op(r.op),
        az=r.az,
        cluster=r.cluster,
        nodegroup=r.nodegroup,
        flavor=r.flavor,
        count=r.count,
        probability=r.probability,
        message=r.message,
        status=r.status,
        retry_after=r.retry_after,
        fired=r.fired,
    )


_NOLOCK = contextlib.nullcontext()
_VERSION = select(tables.meta.c.version).where(tables.meta.c.id == 1)


def _add_role_column(conn: Connection) -> None:
    """A world made before servers kept their role tag gets the column (empty)."""
    names = {c["name"] for c in inspect(conn).get_columns(tables.servers.name)}
    if "role" not in names:
        add = "ADD COLUMN role VARCHAR(64) NOT NULL DEFAULT ''"
        conn.execute(text(f"ALTER TABLE {tables.servers.name} {add}"))
