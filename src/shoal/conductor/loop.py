"""The work loop: claim due resources with leases, reconcile them, requeue.

`run_once()` is one synchronous pass over all due work (tests step with it).
`start()` runs `workers` threads that each claim one resource at a time and a
housekeeping thread (heartbeat: renew held leases, report in `conductors`,
sweep orphans). Nothing waits on a cloud call in a loop: every pass ends by
writing when it wants to be looked at again (`next_reconcile_at`).

Idle workers sleep until the earliest requeue time or lease expiry, or until
woken: in-process by `wake()` (the runtime calls it after each desired-state
commit), across processes on PostgreSQL by `NOTIFY shoal_work`, which a
dedicated LISTEN connection turns into `wake()`. The poll is only a safety net.
Workers claim one resource at a time (SKIP LOCKED), so N conductors share the
node groups pass by pass instead of one taking everything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from shoal.conductor import sweeper
from shoal.conductor.backoff import Backoff
from shoal.conductor.context import Context
from shoal.conductor.ratelimit import RateLimiter
from shoal.conductor.reconcilers import cluster, nodegroup
from shoal.db import leases, notify, work
from shoal.db.engine import Database
from shoal.db.types import utcnow
from shoal.drivers.contract import Driver, DriverError
from shoal.settings import ConductorSettings

log = logging.getLogger(__name__)

Batch = list[str]  # resources of one kind that one pass takes together


# A small node group comes with the other due small groups of its cluster
# (work.claim_due_groups); when every worker is busy, a worker takes several
# clusters' small groups, or several clusters, in one pass.
_KINDS: tuple[tuple[str, Callable[[Context, Batch], None]], ...] = (
    (leases.NODEGROUP, nodegroup.reconcile_batch),
    (leases.CLUSTER, cluster.reconcile_batch),
)


class Conductor:
    """Reconcilers of one process over one database and one driver."""

    def __init__(
        self,
        db: Database,
        driver: Driver,
        settings: ConductorSettings,
        *,
        host: str | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.settings = settings
        # One `conductors` row per process (Magnum lists one per service): several
        # conductors may run on one machine.
        self.host = host or f"{socket.gethostname()}:{os.getpid()}"
        self.holder = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ctx = Context(
            db=db,
            driver=driver,
            settings=settings,
            pool=ThreadPoolExecutor(settings.driver_concurrency, thread_name_prefix="driver"),
            limiter=RateLimiter(settings.driver_rate_per_s),
            backoff=Backoff(base=1.0, cap=settings.backoff_max_seconds),
            now=now,
            holder=self.holder,
        )
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        self._claiming: dict[str, int] = {k: 0 for k, _ in _KINDS}
        # Claimed in a batch, not started yet (also in `_held`: their leases are renewed).
        self._queued: dict[str, deque[Batch]] = {k: deque() for k, _ in _KINDS}
        self._stop = threading.Event()
        # Idle workers sleep on `_cv`; `wake()` rouses one, which rouses the next
        # whenever it finds work (a chain, not a herd of empty claims). Only the
        # idle worker with the earliest deadline (the timekeeper) sleeps until the
        # next requeue; the others until woken or the safety-net poll.
        self._cv = threading.Condition()
        self._woken = False
        self._keeper_at: float | None = None  # monotonic deadline of the timekeeper
        self._sleeping = 0  # idle workers waiting on `_cv`
        self._local = threading.local()  # per worker: whether its last look found work
        self._threads: list[threading.Thread] = []
        self._last_sweep = 0.0
        # Live conductors as of the last heartbeat (None: not counted yet). Alone,
        # a conductor skips the fair-share query on every claim.
        self._live: int | None = None
        self.listener: notify.Listener | None = None
        if not db.is_sqlite:
            self.listener = notify.Listener(db.url, self.wake)

    # -- one pass ------------------------------------------------------------

    def _work(
        self, kind: str, fn: Callable[[Context, Batch], None], batch: Batch, *, defer: bool = False
    ) -> None:
        """One pass under the leases on a batch. The leases are released after it;
        `defer`: by this worker's next claim, in that claim's transaction (a worker
        claims again as soon as a pass ends: one transaction instead of two)."""
        keys = [leases.key(kind, u) for u in batch]
        what = keys[0] if len(keys) == 1 else f"{keys[0]} (+{len(keys) - 1} in its batch)"
        with self._held_lock:
            self._held.update(keys)
        try:
            fn(self.ctx, batch)
        except leases.LeaseLost:  # paused past our lease: the new holder carries on
            log.warning("%s: lease taken over by another conductor; write dropped", what)
        except DriverError as exc:  # a reconciler should catch these; never lose the loop
            log.warning("%s: driver error %s", what, exc.reason)
        except Exception:
            log.exception("%s: reconcile failed; will retry", what)
        finally:
            with self._held_lock:
                self._held.difference_update(keys)
            if defer:
                self._local.release = [*self._take_release(), *keys]
            else:
                self._release(keys)

    def _release(self, keys: list[str]) -> None:
        if not keys:
            return
        try:
            with self.ctx.db.core_write() as s:
                leases.release(s, self.holder, keys)
        except Exception:  # the leases expire by themselves
            log.exception("%s: could not release lease", ", ".join(keys))

    def _take_release(self) -> list[str]:
        """This worker's leases left to release (by its next claim)."""
        keys: list[str] = getattr(self._local, "release", None) or []
        self._local.release = []
        return keys

    def _claim(
        self, kind: str, limit: int, release: list[str] | None = None, *, merge: bool = False
    ) -> list[Batch]:
        db, now, ttl = self.ctx.db, self.ctx.now(), self.settings.lease_seconds
        try:
            if kind == leases.NODEGROUP:
                return work.claim_due_groups(
                    db, self.holder, now, ttl, limit, release=release or (), merge=merge
                )
            uuids = work.claim_due(db, kind, self.holder, now, ttl, limit, release=release or ())
            return [uuids] if merge and uuids else [[u] for u in uuids]
        except Exception:
            self._release(release or [])  # the claim rolled back with the release in it
            raise

    def _claim_fair(self, kind: str) -> tuple[list[Batch], bool]:
        """One resource unless this process already holds its fair share of the due
        work among the live conductors; (claimed, capped). A resource left
        unclaimed for a lease period is taken regardless (a slow peer)."""
        prefix = kind + ":"
        release = self._take_release()
        with self._held_lock:
            queued = self._queued[kind].popleft() if self._queued[kind] else None
        if queued is not None:
            self._release(release)
            return [queued], False
        with self._held_lock:
            mine = sum(1 for k in self._held if k.startswith(prefix)) + self._claiming[kind]
            self._claiming[kind] += 1
        try:
            if self._live == 1 and self.settings.workers > 1:
                with self._cv:
                    idle = self._sleeping
                if idle == 0 and self.ctx.db.is_sqlite:
                    # Every other worker is busy: a backlog. Take several clusters'
                    # small groups, or several clusters, in one pass (one snapshot,
                    # one write). Only where no other conductor can exist (SQLite is
                    # one process): on PostgreSQL a peer may start at any time and
                    # this conductor learns of it only at its next heartbeat, while
                    # a merged batch would keep work from it.
                    merged = self._claim_batch(kind, work.BATCH_MAX // 2, release, merge=True)
                    return merged, False
                return self._claim_batch(kind, 1 + idle, release), False
            if mine > 0 and self._live != 1:
                now = self.ctx.now()
                alive = now - timedelta(seconds=3 * self.heartbeat_period())
                load = work.load(self.ctx.db, kind, now, alive)
                if load.live_conductors > 1:
                    share = -(-load.due // load.live_conductors)
                    waited = (
                        (now - load.oldest_unclaimed).total_seconds()
                        if load.oldest_unclaimed is not None
                        else 0.0
                    )
                    if mine >= share and waited < self.settings.lease_seconds:
                        self._release(release)
                        return [], True
            return self._claim(kind, 1, release), False
        finally:
            with self._held_lock:
                self._claiming[kind] -= 1

    def _claim_batch(
        self, kind: str, limit: int, release: list[str], *, merge: bool = False
    ) -> list[Batch]:
        """Alone, claim for this worker and the idle ones in one query: keep one batch,
        queue the rest for the workers that this wakes. No more than they can
        start at once: a resource claimed early would wait in the queue behind
        passes under way while others become due before it."""
        batches = self._claim(kind, limit, release, merge=merge)
        if len(batches) > 1:
            with self._held_lock:
                for b in batches[1:]:
                    self._held.update(leases.key(kind, u) for u in b)
                    self._queued[kind].append(b)
            for _ in batches[1:]:
                self.wake()
        return batches[:1]

    def heartbeat_period(self) -> float:
        """Leases are renewed (and the process reported alive) this often."""
        return max(0.2, self.settings.lease_seconds / 3)

    def run_once(self) -> int:
        """Reconcile everything due now, synchronously; the number of passes run."""
        done = 0
        for kind, fn in _KINDS:
            batches = self._claim(kind, 10_000)
            with ThreadPoolExecutor(self.settings.workers, thread_name_prefix="pass") as ex:
                list(ex.map(lambda b, k=kind, f=fn: self._work(k, f, b), batches))
            done += len(batches)
        self.heartbeat()
        return done

    def sweep(self) -> int:
        """Delete orphaned machines now; the number deleted."""
        self._last_sweep = time.monotonic()
        try:
            return sweeper.sweep(self.ctx)
        except DriverError as exc:
            log.warning("sweeper: %s", exc.reason)
            return 0

    def heartbeat(self) -> None:
        """Renew the leases this process holds and report it alive."""
        now = self.ctx.now()
        with self._held_lock:
            held = set(self._held)
        with self.ctx.db.core_write() as s:
            leases.renew(s, self.holder, held, now, self.settings.lease_seconds)
            leases.report_alive(s, self.host, now)
        alive = now - timedelta(seconds=3 * self.heartbeat_period())
        self._live = work.live_conductors(self.ctx.db, alive)
        if work.requeue_unobserved(self.ctx.db, now):
            self.wake()

    # -- background ----------------------------------------------------------

    def start(self) -> None:
        """Start the worker and housekeeping threads; returns at once."""
        if self._threads:
            return
        self._stop.clear()
        if self.listener is not None:
            self.listener.start()
        for i in range(self.settings.workers):
            t = threading.Thread(target=self._worker, name=f"conductor-{i}", daemon=True)
            self._threads.append(t)
        self._threads.append(threading.Thread(target=self._housekeeping, daemon=True))
        for t in self._threads:
            t.start()
        self._warm_pool()

    def stop(self) -> None:
        """Stop the threads (passes under way finish) and the driver pool."""
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=30)
        self._threads.clear()
        with self._held_lock:
            queued = [leases.key(k, u) for k, q in self._queued.items() for b in q for u in b]
            for q in self._queued.values():
                q.clear()
            self._held.difference_update(queued)
        if queued:  # claimed but never started: free them for the next conductor now
            try:
                with self.ctx.db.core_write() as s:
                    leases.release(s, self.holder, queued)
            except Exception:  # the leases expire by themselves
                log.exception("could not release queued leases")
        if self.listener is not None:
            self.listener.stop()
        self.ctx.pool.shutdown(wait=True, cancel_futures=True)

    def wake(self) -> None:
        """Look for due work now instead of at the next poll (rouses one idle worker)."""
        with self._cv:
            self._woken = True
            self._cv.notify()

    def poll_period(self) -> float:
        """The idle safety net: long while LISTEN/NOTIFY delivers wake-ups."""
        if self.listener is not None and self.listener.connected.is_set():
            return max(self.settings.poll_seconds, self.settings.listen_poll_seconds)
        return self.settings.poll_seconds

    def _warm(self) -> None:
        """Look at the driver's capabilities (a cached lookup, by the contract) once in
        this thread: a driver that keeps a connection per thread (the sim in its own
        process) opens it now, not in the middle of the first pass, where eight
        workers and 32 pool threads opening theirs at once held up the first creates."""
        try:
            self.ctx.driver.capabilities()
        except Exception:  # the first pass will say what is wrong
            log.debug("driver warm-up failed", exc_info=True)

    def _warm_pool(self) -> None:
        """`_warm` in every thread of the driver pool (all started at once)."""
        n = self.settings.driver_concurrency
        ready = threading.Barrier(n)

        def one() -> None:
            with contextlib.suppress(threading.BrokenBarrierError):
                ready.wait(1.0)  # hold this thread so that the next task starts another
            self._warm()

        for _ in range(n):
            self.ctx.pool.submit(one)

    def _worker(self) -> None:
        self._warm()
        while not self._stop.is_set():
            try:
                found = capped = False
                worked = getattr(self._local, "worked", True)
                for kind, fn in _KINDS:
                    batches, full = self._claim_fair(kind)
                    capped = capped or full
                    for b in batches:
                        found = True
                        self.wake()  # more may be due: let another worker look
                        self._work(kind, fn, b, defer=True)
                self._local.worked = found
                if found:
                    continue
                if capped:  # peers are taking the rest; look again shortly
                    self._stop.wait(0.25)
                    continue
                self._idle(fresh=worked)
            except Exception:
                log.exception("conductor worker: unexpected error; continuing")
                self._stop.wait(self.settings.poll_seconds)
        self._release(self._take_release())

    def _idle(self, fresh: bool = True) -> None:
        """Sleep until woken, the next requeue or lease expiry, or the safety-net poll.

        A worker that just ran passes (requeue times changed) or finds no
        timekeeper computes the next due time; it becomes the timekeeper when
        its deadline is the earliest."""
        timeout = self.poll_period()
        mine: float | None = None
        with self._cv:
            keeper_at = self._keeper_at
        if fresh or keeper_at is None or keeper_at <= time.monotonic():
            now = self.ctx.now()
            nxt = work.next_due_at(self.ctx.db, now)
            if nxt is not None:
                timeout = max(0.01, min(timeout, (nxt - now).total_seconds()))
            deadline = time.monotonic() + timeout
            with self._cv:
                k = self._keeper_at
                if k is None or k <= time.monotonic() or deadline < k:
                    self._keeper_at = mine = deadline
        if mine is None:
            timeout = self.poll_period()
        with self._cv:
            if not self._woken and not self._stop.is_set():
                self._sleeping += 1
                try:
                    self._cv.wait(timeout)
                finally:
                    self._sleeping -= 1
            self._woken = False
            if mine is not None and self._keeper_at == mine:
                self._keeper_at = None

    def _housekeeping(self) -> None:
        period = self.heartbeat_period()
        first = True  # report at once: peers (and this process's claims) count it now
        while first or not self._stop.wait(period):
            try:
                self.heartbeat()
                if not first and time.monotonic() - self._last_sweep >= self.settings.sweep_seconds:
                    self.sweep()
            except Exception:
                log.exception("conductor housekeeping failed; continuing")
            first = False
