"""The simulated cloud: servers with lazily computed states, quotas, capacity, faults.

`SimWorld.open(url, settings, clock)` opens (or creates) the world stored in the
`sim_*` tables at `url`; several processes opening one url see one world. Each
server operation is one short database transaction; an operation that fails
returns its error out of the transaction (so that fault counters and the rate
bucket are committed) and raises it after.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from shoal.drivers import contract
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    DriverError,
    GroupRequest,
    MachineSpec,
    MachineState,
    PermanentError,
    TransientError,
)
from shoal.drivers.sim import catalog, limits, tables
from shoal.drivers.sim.admin import AdminOps
from shoal.drivers.sim.config import Quota, SimConfig
from shoal.drivers.sim.faults import FaultKind, FaultRule, Op, jittered, unit
from shoal.drivers.sim.servers import (
    ADD_USER_DATA,
    FORGET_USER_DATA,
    PURGE_SERVERS,
    PURGE_USER_DATA,
    ROW,
    SimServer,
    view,
)
from shoal.drivers.sim.vms import VM_FLAVOR, VmOps

_S = tables.servers
_ROW = ROW
_TAG_COLUMNS = {
    contract.TAG_PROJECT: _S.c.project,
    contract.TAG_CLUSTER: _S.c.cluster,
    contract.TAG_NODEGROUP: _S.c.nodegroup,
    contract.TAG_NODE: _S.c.node,
    contract.TAG_ROLE: _S.c.role,
}
_U = tables.usage
_UD = tables.user_data
_ADD_USAGE = (
    update(_U)
    .where(_U.c.scope == bindparam("s"), _U.c.key == bindparam("k"))
    .values(
        instances=_U.c.instances + bindparam("di"),
        cores=_U.c.cores + bindparam("dc"),
        ram_mb=_U.c.ram_mb + bindparam("dr"),
    )
)
# Statements of the hot paths, built once: building a statement per call costs
# more than running it.
_BY_ID = select(*_ROW).where(_S.c.machine_id == bindparam("mid"))
_INSERT = insert(_S)
_FORGET = delete(_S).where(_S.c.seq == bindparam("b_seq"))
_MARK_DELETING = (
    update(_S)
    .where(_S.c.seq == bindparam("b_seq"))
    .values(deleting_at=bindparam("now"), gone_at=bindparam("gone"))
)
# Usage is read without a lock: a create takes its room last, by two conditional
# updates just before it commits (az, then project: the order a delete's updates take
# too, so no deadlock), so that creates in different zones never wait on each other and
# one in the same zone waits for two statements, not for the whole create.
_USAGE = select(_U).where(
    or_((_U.c.scope == "project") & (_U.c.key == bindparam("p")), _U.c.scope == "az")
)
_TAKE_ZONE = _ADD_USAGE.where(_U.c.scope == "az", _U.c.cores + bindparam("dc") <= bindparam("cap"))
_TAKE_QUOTA = _ADD_USAGE.where(
    _U.c.scope == "project",
    _U.c.instances + bindparam("di") <= bindparam("li"),
    _U.c.cores + bindparam("dc") <= bindparam("lc"),
    _U.c.ram_mb + bindparam("dr") <= bindparam("lr"),
)
_M = tables.meta
_BUCKET = select(_M.c.bucket_tokens, _M.c.bucket_at).where(_M.c.id == 1)
_SET_BUCKET = update(_M).where(_M.c.id == 1)
_HTTP = {429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
         503: "Service Unavailable"}  # fmt: skip


class SimWorld(AdminOps, VmOps):
    """One simulated cloud. Thread-safe; open it once per process and share it."""

    _calls = 0
    _calls_lock = threading.Lock()

    # -- servers ---------------------------------------------------------------

    def create(self, spec: MachineSpec) -> SimServer:
        """Create the server `spec.machine_id` unless it exists; return it (idempotent)."""
        flavor = catalog.FLAVORS.get(spec.flavor_id)
        if flavor is None:
            raise PermanentError(f"flavor {spec.flavor_id!r} does not exist in the sim cloud")
        if spec.image_id not in catalog.IMAGES:
            raise PermanentError(f"image {spec.image_id!r} does not exist in the sim cloud")
        try:
            with self._txn(write=True) as conn:
                out = self._create(conn, spec, flavor)
        except IntegrityError:  # the same server created at once elsewhere: it exists now
            with self._txn(write=True) as conn:
                out = self._create(conn, spec, flavor)
        if isinstance(out, Exception):
            raise out
        assert out is not None  # a new server is never gone already
        return out

    def delete(self, machine_id: str) -> None:
        """Start deleting a server; unknown or already deleting is done (idempotent)."""
        with self._txn(write=True) as conn:
            err = self._delete(conn, machine_id)
        if err is not None:
            raise err

    def reboot(self, machine_id: str) -> None:
        """Reboot: BUILDING for a quarter of a boot, then ACTIVE (clears an ERROR)."""
        with self._txn(write=True) as conn:
            err = self._restart(conn, machine_id, None, Op.REBOOT)
        if err is not None:
            raise err

    def rebuild(self, machine_id: str, image_id: str) -> None:
        """Reinstall with `image_id`: BUILDING for a boot, same id, name and address."""
        if image_id not in catalog.IMAGES:
            raise PermanentError(f"image {image_id!r} does not exist in the sim cloud")
        with self._txn(write=True) as conn:
            err = self._restart(conn, machine_id, image_id, Op.REBUILD)
        if err is not None:
            raise err

    def apply_group(self, request: GroupRequest) -> None:
        """Make node group `request.nodegroup_id` hold exactly `request.members`, in one
        call, as a Heat stack update does: delete the servers not named, create the
        missing ones; the first refusal stops the update (what was done stays)."""
        for spec in request.members:
            if spec.flavor_id not in catalog.FLAVORS:
                raise PermanentError(f"flavor {spec.flavor_id!r} does not exist in the sim cloud")
            if spec.image_id not in catalog.IMAGES:
                raise PermanentError(f"image {spec.image_id!r} does not exist in the sim cloud")
        want = {m.machine_id for m in request.members}
        with self._txn(write=True) as conn:
            err = self._empty_group(conn, request.nodegroup_id, keep=want)
            for spec in request.members:
                if err is not None:
                    break
                out = self._create(conn, spec, catalog.FLAVORS[spec.flavor_id])
                err = out if isinstance(out, Exception) else None
        if err is not None:
            raise err

    def delete_group(self, nodegroup: str) -> None:
        """Delete every server of a node group (a stack delete); unknown is done."""
        with self._txn(write=True) as conn:
            err = self._empty_group(conn, nodegroup, keep=set())
        if err is not None:
            raise err

    def find(self, tags: Mapping[str, str]) -> list[SimServer]:
        """Every server whose tags include `tags`, in one query over indexed columns."""
        q = select(*_ROW).order_by(_S.c.seq)
        extra = {}
        for key, value in tags.items():
            col = _TAG_COLUMNS.get(key)
            if col is None:
                extra[key] = value
            else:
                q = q.where(col == value)
        with self._txn(write=False) as conn:
            snap = self._load(conn)
            now = snap.config.sim_now(self._clock.now())
            rows = conn.execute(q).all()
        rules = [r for r in snap.faults if _matches(r, Op.LIST, None, tags)]
        if rules:
            with self._txn(write=True) as conn:
                err = self._fire_first(conn, snap.config, rules, json.dumps(dict(tags)), None)
            if err is not None:
                raise err
        out = []
        for row in rows:
            s = view(row, now, snap.config.wall_at)
            if s is not None and all(s.tags.get(k) == v for k, v in extra.items()):
                out.append(s)
        return out

    def user_data(self, machine_id: str) -> str | None:
        """What server `machine_id` was given to boot with (admin: no latency)."""
        with self._txn(write=False) as conn:
            return conn.scalar(select(_UD.c.user_data).where(_UD.c.machine_id == machine_id))

    def booted_with(self) -> list[tuple[str, str]]:
        """(machine id, user data) of every ready server that was given user data: the
        nodes whose agents an emulation runs (admin: no latency)."""
        ready = {s.machine_id for s in self.servers(state=MachineState.ACTIVE.value)}
        with self._txn(write=False) as conn:
            rows = conn.execute(select(_UD.c.machine_id, _UD.c.user_data)).all()
        return [(m, u) for m, u in rows if m in ready]

    def servers(
        self, cluster: str | None = None, nodegroup: str | None = None, state: str | None = None
    ) -> list[SimServer]:
        """Admin view of every server, optionally filtered (no faults, no latency)."""
        q = select(*_ROW).order_by(_S.c.seq)
        if cluster is not None:
            q = q.where(_S.c.cluster == cluster)
        if nodegroup is not None:
            q = q.where(_S.c.nodegroup == nodegroup)
        with self._txn(write=False) as conn:
            now = self._load(conn).config.sim_now(self._clock.now())
            rows = conn.execute(q).all()
        views = (view(r, now) for r in rows)
        return [s for s in views if s is not None and (state is None or s.state == state)]

    def api(self, op: str, key: str, *args: Any) -> Any:
        """One API call as a client makes it: its latency (`pause`), then `op`
        ("create", "delete", "list", "reboot" or "rebuild") with `args`. A world in a
        process of its own answers it in one round trip, not two."""
        calls: dict[str, Callable[..., Any]] = {
            "create": self.create,
            "create_vm": self.create_vm,
            "delete": self.delete,
            "list": self.find,
            "reboot": self.reboot,
            "rebuild": self.rebuild,
            "apply_group": self.apply_group,
            "delete_group": self.delete_group,
        }
        with self._calls_lock:
            self._ops[op] = self._ops.get(op, 0) + 1
        self.pause(op, key)
        return calls[op](*args)

    def api_calls(self) -> dict[str, int]:
        """How many API calls of each kind this process made to the world (as a
        cloud's API log would show them): the per-group mode's proof that no
        per-machine call was made."""
        with self._calls_lock:
            return dict(self._ops)

    def pause(self, op: str, key: str) -> None:
        """Sleep one API call's latency: jittered api_latency_ms, divided by time_scale."""
        cfg = self.cached().config
        if cfg.api_latency_ms <= 0:
            return
        with self._calls_lock:
            SimWorld._calls += 1
            n = SimWorld._calls
        ms = jittered(cfg.api_latency_ms, cfg.jitter, cfg.seed, "api", op, key, n)
        self._clock.sleep(cfg.real_seconds(ms / 1000.0))

    # -- transactions ----------------------------------------------------------

    def _create(
        self, conn: Connection, spec: MachineSpec, flavor: catalog.Flavor
    ) -> SimServer | Exception | None:
        snap = self._load(conn)
        cfg = snap.config
        now = cfg.sim_now(self._clock.now())
        row = conn.execute(_BY_ID, {"mid": spec.machine_id}).first()
        if row is not None:
            found = view(row, now)
            if found is not None:
                return found
            conn.execute(_FORGET, {"b_seq": row.seq})  # gone: the id is free
            conn.execute(FORGET_USER_DATA, {"mid": spec.machine_id})
        az = spec.availability_zone
        if az is not None and az not in cfg.availability_zones:
            zones = ", ".join(cfg.availability_zones)
            return PermanentError(f"availability zone {az!r} does not exist (zones: {zones})")
        err = self._take_token(conn, cfg, now)
        if err is not None:
            return err
        used = self._usage(conn, cfg, spec.project_id)
        need = Quota(1, flavor.vcpus, flavor.ram_mb)
        if az is None:
            az = limits.pick_zone(cfg, used, spec.machine_id, flavor.vcpus)
        fault: str | None = None
        tags = spec.tags
        for rule in snap.faults:
            if not _matches(rule, Op.CREATE, az, tags, flavor.name):
                continue
            if rule.kind in (FaultKind.SERVER_ERROR, FaultKind.NO_VALID_HOST_ASYNC):
                if fault is None and self._fires(conn, cfg, rule, spec.machine_id, False):
                    fault = rule.text
            elif self._fires(conn, cfg, rule, spec.machine_id, True):
                return _error(rule, az)
        limit = snap.quotas.get(spec.project_id, cfg.default_quota)
        err = limits.quota_error(limit, used[("project", spec.project_id)], need, spec.project_id)
        err = err or limits.capacity_error(cfg, used, az, spec.availability_zone, flavor.vcpus)
        if err is not None or az is None:
            return err
        boot = jittered(cfg.boot_seconds, cfg.jitter, cfg.seed, spec.machine_id, "boot")
        values: dict[str, Any] = dict(
            machine_id=spec.machine_id, name=spec.name, project=spec.project_id,
            cluster=spec.cluster_id, nodegroup=spec.nodegroup_id, node=spec.machine_id,
            role=spec.role, flavor=flavor.name, image=spec.image_id, az=az,
            vcpus=flavor.vcpus, ram_mb=flavor.ram_mb, created_at=now, ready_at=now + boot,
            up_at=now + boot, fault=fault, deleting_at=None, gone_at=None, delete_failures=0,
        )  # fmt: skip
        pk = conn.execute(_INSERT, values).inserted_primary_key
        assert pk is not None
        if spec.user_data:
            conn.execute(
                ADD_USER_DATA, {"machine_id": spec.machine_id, "user_data": spec.user_data}
            )
        taken = self._take(conn, cfg, spec.project_id, az, spec.availability_zone, need, limit)
        if taken is not None:  # another create took the room since `used` was read
            conn.execute(_FORGET, {"b_seq": pk[0]})
            conn.execute(FORGET_USER_DATA, {"mid": spec.machine_id})
            return taken
        return view([pk[0] if c.name == "seq" else values[c.name] for c in _ROW], now)

    @staticmethod
    def _purge(conn: Connection, now: float) -> None:
        """Forget finished deletes (those another transaction is forgetting skipped)."""
        conn.execute(PURGE_USER_DATA, {"now": now})
        conn.execute(PURGE_SERVERS, {"now": now})

    def _delete(self, conn: Connection, machine_id: str, purge: bool = True) -> Exception | None:
        snap = self._load(conn)
        cfg = snap.config
        now = cfg.sim_now(self._clock.now())
        if purge:
            self._purge(conn, now)
        row = conn.execute(_BY_ID, {"mid": machine_id}).first()
        if row is None or row.deleting_at is not None:
            return None
        for rule in snap.faults:
            if not _matches(rule, Op.DELETE, row.az, _tags(row), row.flavor):
                continue
            once = rule.kind is FaultKind.DELETE_FAILS_ONCE
            if once and row.delete_failures > 0:
                continue
            if self._fires(conn, cfg, rule, machine_id, not once):
                if once:
                    conn.execute(update(_S).where(_S.c.seq == row.seq).values(delete_failures=1))
                return _error(rule, row.az)
        took = jittered(cfg.delete_seconds, cfg.jitter, cfg.seed, machine_id, "delete")
        conn.execute(_MARK_DELETING, {"b_seq": row.seq, "now": now, "gone": now + took})
        if row.flavor != VM_FLAVOR:  # a VM counts against its host, never a quota
            self._add_usage(conn, row.project, row.az, Quota(1, row.vcpus, row.ram_mb), -1)
        return None

    def _empty_group(self, conn: Connection, nodegroup: str, keep: set[str]) -> Exception | None:
        """Start deleting the servers of `nodegroup` not in `keep`; the first refusal."""
        rows = conn.execute(
            select(_S.c.machine_id).where(_S.c.nodegroup == nodegroup, _S.c.deleting_at.is_(None))
        ).all()
        self._purge(conn, self._load(conn).config.sim_now(self._clock.now()))  # once a group
        for (mid,) in rows:
            if mid not in keep and (err := self._delete(conn, mid, purge=False)) is not None:
                return err
        return None

    def _restart(
        self, conn: Connection, machine_id: str, image: str | None, op: Op
    ) -> Exception | None:
        snap = self._load(conn)
        cfg = snap.config
        now = cfg.sim_now(self._clock.now())
        row = conn.execute(_BY_ID, {"mid": machine_id}).first()
        s = view(row, now) if row is not None else None
        if row is None or s is None:
            return PermanentError(f"server {machine_id} does not exist in the sim cloud")
        if s.state is MachineState.DELETING:
            return PermanentError(f"server {machine_id} is being deleted")
        rules = [r for r in snap.faults if _matches(r, op, row.az, s.tags, row.flavor)]
        err = self._fire_first(conn, cfg, rules, machine_id, row.az)
        if err is not None:
            return err
        if s.state is MachineState.BUILDING and image in (None, row.image):
            return None  # the same operation is already under way
        mean = cfg.boot_seconds / 4 if op is Op.REBOOT else cfg.boot_seconds
        took = jittered(mean, cfg.jitter, cfg.seed, machine_id, str(op), now)
        values: dict[str, Any] = {"ready_at": now + took, "fault": None}
        if image is not None:
            values["image"] = image
        conn.execute(update(_S).where(_S.c.seq == row.seq).values(**values))
        return None

    # -- helpers ---------------------------------------------------------------

    def _fires(
        self, conn: Connection, cfg: SimConfig, rule: FaultRule, key: str, per_try: bool
    ) -> bool:
        """Whether `rule` fires now; consumes one of its `count` if it does (atomically).

        per_try: roll the odds again on every attempt (transient faults clear on
        retry); otherwise once per machine (a machine is faulty or it is not)."""
        f = tables.faults
        if rule.probability < 1.0:
            seen: int | None = 0
            if per_try:
                seen = conn.execute(
                    update(f).where(f.c.id == rule.id).values(seen=f.c.seen + 1).returning(f.c.seen)
                ).scalar()
                if seen is None:
                    return False  # removed meanwhile
            if unit(cfg.seed, "fault", rule.id, key, seen) >= rule.probability:
                return False
        stmt = update(f).where(f.c.id == rule.id).values(fired=f.c.fired + 1)
        if rule.count is not None:
            stmt = stmt.where(f.c.fired < rule.count)
        return conn.execute(stmt).rowcount == 1

    def _fire_first(
        self, conn: Connection, cfg: SimConfig, rules: list[FaultRule], key: str, az: str | None
    ) -> Exception | None:
        for rule in rules:
            if self._fires(conn, cfg, rule, key, True):
                return _error(rule, az)
        return None

    def _take_token(self, conn: Connection, cfg: SimConfig, now: float) -> DriverError | None:
        """The create rate limit: a token bucket shared by every process (429 when empty)."""
        rate = cfg.rate_limit_per_s
        if rate <= 0:
            return None
        tokens, at = conn.execute(_BUCKET).one()
        tokens = min(cfg.rate_burst, tokens + max(0.0, now - at) * rate)
        ok = tokens >= 1.0
        conn.execute(_SET_BUCKET, {"bucket_tokens": tokens - ok, "bucket_at": now})
        if ok:
            return None
        return TransientError(
            f"Too Many Requests (HTTP 429): the sim cloud accepts {rate:g} creates per second",
            retry_after=cfg.real_seconds((1.0 - tokens) / rate),
        )

    def _usage(
        self, conn: Connection, cfg: SimConfig, project: str
    ) -> dict[tuple[str, str], Quota]:
        """Usage of `project` and of every zone, as last committed (no lock: `_take`)."""
        rows = conn.execute(_USAGE, {"p": project}).all()
        got = {(r.scope, r.key): Quota(r.instances, r.cores, r.ram_mb) for r in rows}
        keys = [("project", project), *(("az", z) for z in cfg.availability_zones)]
        missing = [k for k in keys if k not in got]
        if missing:  # first use of a project or zone; another process may race us
            ins = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(_U)
            conn.execute(
                ins.on_conflict_do_nothing(),
                [dict(scope=s, key=k, instances=0, cores=0, ram_mb=0) for s, k in missing],
            )
            rows = conn.execute(_USAGE, {"p": project}).all()
            got = {(r.scope, r.key): Quota(r.instances, r.cores, r.ram_mb) for r in rows}
        return got

    def _take(
        self, conn: Connection, cfg: SimConfig, project: str, az: str, asked: str | None,
        need: Quota, limit: Quota,
    ) -> BlockedError | None:  # fmt: skip
        """Count `need` in zone `az` and in `project` if both still have room (each a
        conditional update); else nothing is counted and the refusal says why, in the
        numbers read afresh."""
        d = dict(di=need.instances, dc=need.cores, dr=need.ram_mb)
        if conn.execute(_TAKE_ZONE, dict(s="az", k=az, cap=cfg.capacity(az), **d)).rowcount:
            q = dict(li=limit.instances, lc=limit.cores, lr=limit.ram_mb)
            if conn.execute(_TAKE_QUOTA, dict(s="project", k=project, **q, **d)).rowcount:
                return None
            conn.execute(_ADD_USAGE, dict(s="az", k=az, di=-d["di"], dc=-d["dc"], dr=-d["dr"]))
        used = self._usage(conn, cfg, project)
        return limits.quota_error(limit, used[("project", project)], need, project) or (
            limits.capacity_error(cfg, used, az, asked, need.cores)
            or BlockedError(
                f"No valid host was found in {az} (it filled meanwhile)",
                BlockedKind.NO_VALID_HOST,
                az=asked,
            )
        )

    def _add_usage(self, conn: Connection, project: str, az: str, q: Quota, sign: int) -> None:
        d = dict(di=sign * q.instances, dc=sign * q.cores, dr=sign * q.ram_mb)
        # az before project: the order `_take` locks them in, so no deadlock
        conn.execute(_ADD_USAGE, [dict(s="az", k=az, **d), dict(s="project", k=project, **d)])


def _tags(row: Any) -> dict[str, str]:
    return {
        contract.TAG_CLUSTER: row.cluster,
        contract.TAG_NODEGROUP: row.nodegroup,
    }


def _matches(
    rule: FaultRule, op: Op, az: str | None, tags: Mapping[str, str], flavor: str = ""
) -> bool:
    cluster = tags.get(contract.TAG_CLUSTER, "")
    return rule.matches(op, az, cluster, tags.get(contract.TAG_NODEGROUP, ""), flavor)


def _error(rule: FaultRule, az: str | None) -> Exception:
    """The error an injected fault raises, shaped like Nova's (a driver bug: what
    no driver may raise, to prove that shoal's conductor survives it)."""
    if rule.kind is FaultKind.DRIVER_BUG:
        return KeyError(rule.text)
    if rule.kind is FaultKind.QUOTA_EXCEEDED:
        return BlockedError(rule.text, BlockedKind.QUOTA)
    if rule.kind is FaultKind.NO_VALID_HOST:
        where = f" (availability zone {az})" if az else ""
        return BlockedError(rule.text + where, BlockedKind.NO_VALID_HOST, az=az)
    status = rule.status or 500
    text = rule.message or f"{_HTTP.get(status, 'Error')} (HTTP {status})"
    retry = rule.retry_after if rule.retry_after is not None else (1.0 if status == 429 else None)
    return TransientError(text, retry_after=retry)
