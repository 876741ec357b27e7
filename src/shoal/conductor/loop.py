"""The work loop: claim due resources with leases, reconcile them, requeue.

`run_once()` is one synchronous pass over all due work (tests step with it).
`start()` runs `workers` threads that each claim one resource at a time and a
housekeeping thread (heartbeat: renew held leases, report in `conductors`,
sweep orphans). Nothing waits on a cloud call in a loop: every pass ends by
writing when it wants to be looked at again (`next_reconcile_at`).

Idle workers sleep until the next due time of this process's own work (what
its passes wrote, `Claims.own_next`), or until woken: in-process by `wake()`
(the runtime calls it after each desired-state commit), across processes on
PostgreSQL by `NOTIFY shoal_work`, which a dedicated LISTEN connection turns
into `wake()`. The due times of the rest of the fleet (peers' work, lease
expiries) are looked at no more often than `peer_look_period()`, so a
conductor's wake-ups follow its own work, not the whole fleet's; a resource its
last conductor does not take (capped at its share, or dead) waits at most that
period for another. Workers capped at their fair share sleep the same way. The
poll is only a safety net. Workers claim one resource at a time (SKIP LOCKED),
so N conductors share the node groups pass by pass instead of one taking
everything.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from shoal.conductor import calls, errors
from shoal.conductor.claims import Claims
from shoal.conductor.context import Context
from shoal.conductor.delegations import StoredDelegations
from shoal.conductor.housekeeping import Housekeeping
from shoal.conductor.kinds import KINDS, Batch, WorkKind
from shoal.db import leases, notify, queue, registry
from shoal.db.engine import Database
from shoal.db.types import utcnow
from shoal.domain.bootstrap import ClusterSecrets
from shoal.drivers.providers import Providers
from shoal.settings import ConductorSettings

log = logging.getLogger(__name__)


class Conductor:
    """Reconcilers of one process over one database and the deployment's providers."""

    def __init__(
        self,
        db: Database,
        providers: Providers,
        settings: ConductorSettings,
        *,
        host: str | None = None,
        now: Callable[[], datetime] = utcnow,
        api_url: str = "http://127.0.0.1:9511",
        node_token: Callable[[str], str] | None = None,
        delegations: StoredDelegations | None = None,
        kube_secrets: Callable[[str], ClusterSecrets] | None = None,
    ) -> None:
        self.settings = settings
        # One `conductors` row per process (Magnum lists one per service): several
        # conductors may run on one machine.
        self.host = host or f"{socket.gethostname()}:{os.getpid()}"
        self.holder = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ctx = Context.build(
            db,
            providers,
            settings,
            now=now,
            holder=self.holder,
            api_url=api_url,
            node_token=node_token,
            delegations=delegations,
            kube_secrets=kube_secrets,
        )
        self._stop = threading.Event()
        # Idle workers sleep on `_cv`; `wake()` rouses one, which rouses the next
        # whenever it finds work (a chain, not a herd of empty claims). Only the
        # idle worker with the earliest deadline (the timekeeper) sleeps until the
        # next requeue; the others until woken or the safety-net poll.
        self._cv = threading.Condition()
        self._woken = False
        self._keeper_at: float | None = None  # monotonic deadline of the timekeeper
        self._peer_at = 0.0  # monotonic time of the next look at the fleet's due times
        self._sleeping = 0  # idle workers waiting on `_cv`
        self._local = threading.local()  # per worker: whether its last look found work
        self._threads: list[threading.Thread] = []
        self.claims = Claims(
            db,
            self.holder,
            settings,
            now=now,
            idle_workers=self._idle_workers,
            wake=self._rouse,
        )
        self.housekeeping = Housekeeping(self.ctx, self.claims, self.host, self.wake)
        self.listener: notify.Listener | None = None
        if not db.is_sqlite:
            self.listener = notify.Listener(db.url, self.wake)

    # -- one pass ------------------------------------------------------------

    def _work(self, kind: WorkKind, batch: Batch, *, defer: bool = False) -> None:
        """One pass under the leases on a batch; the leases are released after it
        (`defer`: by this worker's next claim). An unexpected error in one resource's
        part of the pass is that resource's alone (conductor/guard.py); one in what
        the batch shares (its snapshot read, the database) makes the batch wait with
        a growing delay (conductor/errors.py), never due again at once."""
        keys = [leases.key(kind.name, u) for u in batch]
        what = keys[0] if len(keys) == 1 else f"{keys[0]} (+{len(keys) - 1} in its batch)"
        self.claims.hold(keys)
        started = self.ctx.now()
        try:
            kind.reconcile(self.ctx, batch)
        except leases.LeaseLost:  # paused past our lease: the new holder carries on
            log.warning("%s: lease taken over by another conductor; write dropped", what)
        except Exception as exc:
            log.exception("%s: pass failed; retrying with backoff", what)
            errors.record(self.ctx, kind.queue, batch, exc, started)
        finally:
            self.claims.done(keys, defer=defer)

    def run_once(self, *, merge: bool = False) -> int:
        """Reconcile everything due now, synchronously; the number of passes run.
        `merge`: the small node groups of all clusters in one pass, as a busy SQLite
        conductor takes them (`Claims.claim_fair`)."""
        done = 0
        for kind in KINDS:
            batches = self.claims.claim(kind, 10_000, merge=merge)
            with ThreadPoolExecutor(self.settings.workers, thread_name_prefix="pass") as ex:
                list(ex.map(lambda b, k=kind: self._work(k, b), batches))
            done += len(batches)
        self.heartbeat()
        return done

    def sweep(self) -> int:
        """Delete orphaned machines now; the number deleted."""
        return self.housekeeping.sweep()

    def heartbeat(self) -> None:
        """Renew the leases this process holds and report it alive."""
        self.housekeeping.heartbeat()

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
        house = threading.Thread(
            target=self.housekeeping.run, args=(self._stop,), name="housekeeping", daemon=True
        )
        self._threads.append(house)
        for t in self._threads:
            t.start()
        calls.warm_pool(self.ctx)

    def stop(self) -> None:
        """Stop the threads (passes under way finish) and the driver pool."""
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=30)
        self._threads.clear()
        self.claims.release_queued()  # claimed but never started: free them for others now
        try:
            registry.report_gone(self.ctx.db, self.host)  # no longer a live conductor
        except Exception:  # it will look dead once its last report is old
            log.warning("could not report this conductor gone", exc_info=True)
        if self.listener is not None:
            self.listener.stop()
        self.ctx.pool.shutdown(wait=True, cancel_futures=True)

    def wake(self) -> None:
        """Look for due work now instead of at the next poll (rouses one idle worker):
        desired state changed. The next idle worker also looks at the fleet's due
        times again (the new work's next passes may be a peer's)."""
        with self._cv:
            self._peer_at = 0.0
        self._rouse()

    def _rouse(self) -> None:
        """Rouse one idle worker (a worker that found work lets the next one look)."""
        with self._cv:
            self._woken = True
            self._cv.notify()

    def _idle_workers(self) -> int:
        with self._cv:
            return self._sleeping

    def poll_period(self) -> float:
        """The idle safety net: long while LISTEN/NOTIFY delivers wake-ups."""
        if self.listener is not None and self.listener.connected.is_set():
            return max(self.settings.poll_seconds, self.settings.listen_poll_seconds)
        return self.settings.poll_seconds

    def _worker(self) -> None:
        calls.warm(self.ctx)
        # The kinds with due work as the last claim's transaction saw them, while no
        # pass ran since (None: unknown): a worker then needs no read of its own.
        due: set[str] | None = None
        while not self._stop.is_set():
            try:
                found = capped = False
                worked = getattr(self._local, "worked", True)
                if due is None and not self.claims.releasing():
                    due = self.claims.due_kinds()  # one read for every kind
                for kind in KINDS:
                    take = self.claims.claim_fair(kind, due)  # after a pass: not `due`
                    capped = capped or take.capped
                    due = take.due
                    for b in take.batches:
                        found = True
                        if due:  # work is left: let another worker take it
                            self._rouse()
                        due = None  # the pass changes what is due
                        self._work(kind, b, defer=True)
                self._local.worked = found
                if found:
                    continue
                due = None
                # Capped: peers are taking the rest; this process's share grows only
                # when more work comes due (its own schedule, a wake-up, the look at
                # the fleet's due times), which is what `_idle` waits for.
                self._idle(fresh=worked or capped)
            except Exception:
                due = None
                log.exception("conductor worker: unexpected error; continuing")
                self._stop.wait(self.settings.poll_seconds)
        self.claims.release(self.claims.take_release())

    def peer_look_period(self) -> float:
        """How often at most this process looks at the fleet's due times (the work
        its own passes did not schedule): half a requeue period, within 0.05-1 s."""
        return min(1.0, max(0.05, self.settings.requeue_seconds / 2), self.poll_period())

    def _until_due(self) -> float:
        """Seconds until this process may find work to claim: the next due time of its
        own work, or the next look at the fleet's (peers' work, expired leases). A
        look wakes a worker for work left unclaimed a look period after it was due
        (its last conductor did not take it: capped at its share, or gone), or for
        any due work while this process has less of the fleet's than its share (so a
        new or idle conductor takes some over); else it comes again a period after
        the fleet's next due time. The safety-net poll at most."""
        now = self.ctx.now()
        t = time.monotonic()
        wait = self.poll_period()
        own = self.claims.own_next(now)
        if own is not None:
            wait = min(wait, (own - now).total_seconds())
        with self._cv:
            look = self._peer_at <= t
        if look:
            period = self.peer_look_period()
            seen = queue.outlook(self.ctx.db, now)
            self.claims.scheduled = seen.scheduled
            late = None if seen.next_due is None else (now - seen.next_due).total_seconds()
            # Less than its share of the fleet's scheduled work (by more than one):
            # look again when the next free work is due, to take what is let go.
            live = max(1, self.claims.live or 1)
            under = (self.claims.own_count() + 1) * live <= seen.scheduled
            free = None if seen.next_free is None else (seen.next_free - now).total_seconds()
            if late is None:
                gap = self.poll_period()
            elif late >= 0:
                gap = period
            elif under and free is not None:
                gap = max(0.01, free)
            else:
                gap = period - late
            with self._cv:
                self._peer_at = t + gap
            if late is not None and (late >= period or (late >= 0 and under)):
                return 0.01  # take it now
        with self._cv:
            wait = min(wait, self._peer_at - t)
        return max(0.01, wait)

    def _idle(self, fresh: bool = True) -> None:
        """Sleep until woken, the next due time (`_until_due`), or the safety-net poll.

        A worker that just ran passes (requeue times changed) or finds no
        timekeeper computes the next due time; it becomes the timekeeper when
        its deadline is the earliest."""
        timeout = self.poll_period()
        mine: float | None = None
        with self._cv:
            keeper_at = self._keeper_at
        if fresh or keeper_at is None or keeper_at <= time.monotonic():
            timeout = min(timeout, self._until_due())
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
