"""The work loop: claim due resources with leases, reconcile them, requeue.

`run_once()` is one synchronous pass over all due work (tests step with it).
`start()` runs `workers` threads that each claim one resource at a time and the
housekeeping threads (the heartbeat: renew held leases, report in `conductors`;
beside it the looks at the clouds: provider checks, the orphan sweeper). Nothing
waits on a cloud call in a loop: every pass ends by writing when it wants to be
looked at again (`next_reconcile_at`).

Idle workers sleep until the earliest requeue time or lease expiry, or until
woken: in-process by `wake()` (the runtime calls it after each desired-state
commit), across processes on PostgreSQL by `NOTIFY shoal_work`, which a
dedicated LISTEN connection turns into `wake()`. The poll is only a safety net.
Workers claim one resource at a time (SKIP LOCKED), so N conductors share the
node groups pass by pass instead of one taking everything: every conductor's
timekeeper wakes at the fleet's next due time and they race for it. An idle
worker's look is one read for every kind of work (`queue.look`); a claim's
transaction says what is left, so a worker wakes another only when some is. A
process capped at its fair share sleeps like an idle one: its timekeeper looks
again when more work comes due, when it would take the oldest regardless, or
after `capped_look_period()`.
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

from shoal.conductor import calls, errors, pacing
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
        # next requeue (or the safety-net poll) and looks for them all; the others
        # until woken, or until no timekeeper is left waiting.
        self._cv = threading.Condition()
        self._woken = False
        self._keeper_at: float | None = None  # monotonic deadline of the timekeeper
        self._sleeping = 0  # idle workers waiting on `_cv`
        self._threads: list[threading.Thread] = []
        self.claims = Claims(
            db,
            self.holder,
            settings,
            now=now,
            idle_workers=self._idle_workers,
            wake=self.wake,
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
        beat = threading.Thread(
            target=self.housekeeping.run, args=(self._stop,), name="heartbeat", daemon=True
        )
        looks = threading.Thread(
            target=self.housekeeping.run_looks, args=(self._stop,), name="looks", daemon=True
        )
        self._threads += [beat, looks]
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
        """Look for due work now instead of at the next poll (rouses one idle worker)."""
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

    def capped_look_period(self) -> float:
        """How often the timekeeper of a process capped at its fair share looks again
        (peers take the rest; its share grows only when more work comes due)."""
        return min(
            self.poll_period(), max(pacing.CAPPED_LOOK_MIN_S, self.settings.requeue_seconds / 2)
        )

    def _worker(self) -> None:
        calls.warm(self.ctx)
        # What the last look or claim's transaction saw, while no pass ran since (None:
        # unknown): the kinds with due work, and when more may come due.
        look: queue.Look | None = None
        while not self._stop.is_set():
            try:
                found = False
                capped: float | None = None
                for kind in KINDS:
                    if look is None and not self.claims.releasing():
                        look = self.claims.look()  # one read for every kind
                    if look is not None and not look.due(kind.name):
                        if not self.claims.queued(kind.name):
                            continue
                        look = None  # claimed here for the idle workers: take one
                    # After a pass (leases to release), the claim writes anyway: no look.
                    take = self.claims.claim_fair(kind, looked=look is not None)
                    if take.capped_for is not None:
                        c = take.capped_for
                        capped = c if capped is None else min(capped, c)
                    if take.look is not None:
                        look = take.look
                    for b in take.batches:
                        found = True
                        if look is None or look.any_due:
                            self.wake()  # more is due: let another worker take it
                        look = None  # the pass changes what is due
                        self._work(kind, b, defer=True)
                if found:
                    continue
                # Capped: peers are taking the rest; this process looks again when it
                # would take the oldest regardless, or after `capped_look_period`.
                self._idle(look, capped)
                look = None
            except Exception:
                look = None
                log.exception("conductor worker: unexpected error; continuing")
                self._stop.wait(self.settings.poll_seconds)
        self.claims.release(self.claims.take_release())

    def _idle(self, look: queue.Look | None = None, capped: float | None = None) -> None:
        """Sleep until woken, the next requeue or lease expiry (as `look` saw them, else
        as read now), or the safety-net poll; `capped`: this process holds its share
        of the due work, and takes the oldest regardless in that many seconds.

        A worker that knows the next due time (it just looked or claimed), or finds
        no timekeeper, computes its deadline; it becomes the timekeeper when its
        deadline is the earliest. The others sleep until woken, or until no
        timekeeper waits at the end of a poll period (an idle process makes one look
        per period, not one per worker)."""
        timeout = self.poll_period()
        mine: float | None = None
        with self._cv:
            keeper_at = self._keeper_at
        known = look is not None or capped is not None
        if known or keeper_at is None or keeper_at <= time.monotonic():
            if capped is not None:
                timeout = min(timeout, capped, self.capped_look_period())
                coming = look.next_coming() if look is not None else None
                if coming is not None:
                    timeout = min(timeout, (coming - self.ctx.now()).total_seconds())
                timeout = max(0.01, timeout)
            else:
                look = look or self.claims.look()
                nxt = look.next_at
                if nxt is not None:
                    left = (nxt - self.ctx.now()).total_seconds()
                    timeout = max(0.01, min(timeout, left))
            deadline = time.monotonic() + timeout
            with self._cv:
                k = self._keeper_at
                if k is None or k <= time.monotonic() or deadline < k:
                    self._keeper_at = mine = deadline
        if mine is None:
            timeout = self.poll_period()
        with self._cv:
            for _ in range(1 if mine is not None else pacing.IDLE_RESLEEPS):
                if self._woken or self._stop.is_set():
                    break
                self._sleeping += 1
                try:
                    self._cv.wait(timeout)
                finally:
                    self._sleeping -= 1
                k = self._keeper_at
                if mine is not None or k is None or k < time.monotonic() - timeout:
                    break  # no timekeeper for a whole period: look
            woken, self._woken = self._woken, False
            if woken and mine is not None and self._keeper_at == mine:
                # Called to work. A timekeeper whose time came looks and keeps time
                # again at once: its past deadline tells the others it is on its way.
                self._keeper_at = None
