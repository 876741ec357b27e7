"""Claim policy: which due work a worker takes, and the leases this process holds.

- Alone (the embedded SQLite setup, or the only live conductor), a worker claims
  for itself and the idle workers in one query and queues the extra batches for
  them; when every worker is busy with a backlog (SQLite only), it takes several
  clusters' small groups, or several clusters, in one pass.
- With peers (PostgreSQL), a worker takes one resource at a time, and no more
  than this process's fair share of the due work among the live conductors;
  work left unclaimed for a lease period is taken regardless (a slow peer). A
  capped claim says when that will be (`Take.capped_for`): the loop waits for
  it, or for more work coming due, instead of polling.
- A claim's transaction also reads what is left to claim (`queue.Look`): the
  worker wakes another only when some is, and needs no read of its own to
  learn when to look next.
- A worker releases the leases of its last pass in its next claim's transaction
  (one write instead of two); leases are released at once when it stops or when
  it takes queued work instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from shoal.conductor import pacing
from shoal.conductor.kinds import KINDS, Batch, WorkKind
from shoal.db import leases, queue, registry
from shoal.db.engine import Database
from shoal.settings import ConductorSettings

log = logging.getLogger(__name__)


class Take(NamedTuple):
    """What a worker's claim took."""

    batches: list[Batch]
    # This process holds its fair share already and peers are taking the rest: the
    # seconds until it takes the oldest due work regardless (None: not capped).
    capped_for: float | None = None
    # What the claim's transaction saw after its claims (None: no claim ran).
    look: queue.Look | None = None


class Claims:
    """The leases of one conductor process and how its workers claim more."""

    def __init__(
        self,
        db: Database,
        holder: str,
        settings: ConductorSettings,
        *,
        now: Callable[[], datetime],
        idle_workers: Callable[[], int],
        wake: Callable[[], None],
    ) -> None:
        self.db = db
        self.holder = holder
        self.settings = settings
        self._now = now
        self._idle_workers = idle_workers
        self._wake = wake
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._claiming: dict[str, int] = {k.name: 0 for k in KINDS}
        # Claimed in a batch, not started yet (also in `_held`: their leases are renewed).
        self._queued: dict[str, deque[Batch]] = {k.name: deque() for k in KINDS}
        self._local = threading.local()  # per worker: leases to release with its next claim
        # Live conductors as of the last heartbeat (None: not counted yet). Alone, a
        # conductor skips the fair-share query on every claim.
        self.live: int | None = None
        # The due work per kind as last counted (monotonic time, Load): the capped
        # workers of this process re-check their share together, one count for all.
        self._load: dict[str, tuple[float, queue.Load]] = {}

    # -- leases held ------------------------------------------------------------

    def held(self) -> set[str]:
        """The lease keys this process holds (renewed by the heartbeat)."""
        with self._lock:
            return set(self._held)

    def hold(self, keys: list[str]) -> None:
        with self._lock:
            self._held.update(keys)

    def done(self, keys: list[str], *, defer: bool) -> None:
        """A pass under `keys` ended: release them now, or (`defer`) with this worker's
        next claim, in that claim's transaction (a worker claims again as soon as a
        pass ends: one transaction instead of two)."""
        with self._lock:
            self._held.difference_update(keys)
        if defer:
            self._local.release = [*self.take_release(), *keys]
        else:
            self.release(keys)

    def release(self, keys: list[str]) -> None:
        """Drop leases now (errors are logged: the leases expire by themselves)."""
        if not keys:
            return
        try:
            with self.db.core_write() as s:
                leases.release(s, self.holder, keys)
        except Exception:
            log.exception("%s: could not release lease", ", ".join(keys))

    def releasing(self) -> bool:
        """Whether this worker has leases to release (its next claim writes anyway)."""
        return bool(getattr(self._local, "release", None))

    def queued(self, kind: str) -> bool:
        """Whether batches of `kind` this process claimed wait for a worker (a look does
        not see them: they are leased, so not free)."""
        with self._lock:
            return bool(self._queued[kind])

    def look(self) -> queue.Look:
        """What may be claimed now and next: one read for every kind of work."""
        return queue.look(self.db, self._now())

    def take_release(self) -> list[str]:
        """This worker's leases left to release (by its next claim)."""
        keys: list[str] = getattr(self._local, "release", None) or []
        self._local.release = []
        return keys

    def release_queued(self) -> None:
        """Free the batches claimed but never started (the conductor is stopping)."""
        with self._lock:
            keys = [leases.key(k, u) for k, q in self._queued.items() for b in q for u in b]
            for q in self._queued.values():
                q.clear()
            self._held.difference_update(keys)
        self.release(keys)

    # -- claiming -----------------------------------------------------------------

    def claim(
        self,
        kind: WorkKind,
        limit: int,
        release: list[str] | None = None,
        *,
        merge: bool = False,
        looked: bool = False,
        seen: queue.Seen | None = None,
    ) -> list[Batch]:
        """Claim up to `limit` batches of due `kind` work (after releasing `release`);
        `looked`, `seen`: as for `queue.claim_due`."""
        try:
            return kind.claim(
                self.db,
                self.holder,
                self._now(),
                self.settings.lease_seconds,
                limit,
                release=release or (),
                merge=merge,
                looked=looked,
                seen=seen,
            )
        except Exception:
            self.release(release or [])  # the claim rolled back with the release in it
            raise

    def claim_fair(self, kind: WorkKind, *, looked: bool = False) -> Take:
        """What one worker takes now. `looked`: the worker has just read that `kind`
        has due work (the claim reads no more first)."""
        release = self.take_release()
        with self._lock:
            queued = self._queued[kind.name].popleft() if self._queued[kind.name] else None
        if queued is not None:
            self.release(release)
            return Take([queued])
        prefix = kind.name + ":"
        with self._lock:
            mine = sum(1 for k in self._held if k.startswith(prefix)) + self._claiming[kind.name]
            self._claiming[kind.name] += 1
        seen = queue.Seen()
        try:
            if self.live == 1 and self.settings.workers > 1:
                idle = self._idle_workers()
                if idle == 0 and self.db.is_sqlite:
                    # Every other worker is busy: a backlog. Take several clusters'
                    # small groups, or several clusters, in one pass (one snapshot,
                    # one write). Only where no other conductor can exist (SQLite is
                    # one process): on PostgreSQL a peer may start at any time and
                    # this conductor learns of it only at its next heartbeat, while
                    # a merged batch would keep work from it.
                    merged = self._for_idle(
                        kind, queue.BATCH_MAX // 2, release, merge=True, looked=looked, seen=seen
                    )
                    return Take(merged, None, seen.look)
                got = self._for_idle(kind, 1 + idle, release, looked=looked, seen=seen)
                return Take(got, None, seen.look)
            if mine > 0 and self.live != 1:
                capped_for = self._over_share(kind, mine)
                if capped_for is not None:
                    self.release(release)
                    return Take([], capped_for)
            return Take(self.claim(kind, 1, release, looked=looked, seen=seen), None, seen.look)
        finally:
            with self._lock:
                self._claiming[kind.name] -= 1

    def _over_share(self, kind: WorkKind, mine: int) -> float | None:
        """Whether `mine` resources already reach this process's share of the due work
        among the live conductors, unless some has waited a lease period: the seconds
        until it will have (None: not over its share)."""
        now = self._now()
        live = self.live  # the heartbeat's count (every lease / 3 s)
        if live is None:
            live = registry.live_conductors(self.db, now)
        if live <= 1:
            return None
        load = self._due(kind, now)
        share = -(-load.due // live)
        waited = (
            (now - load.oldest_unclaimed).total_seconds()
            if load.oldest_unclaimed is not None
            else 0.0
        )
        left = self.settings.lease_seconds - waited
        return left if mine >= share and left > 0 else None

    def _due(self, kind: WorkKind, now: datetime) -> queue.Load:
        """The due work of `kind`, counted at most once per `pacing.LOAD_TTL_S` by this process:
        the workers that claim at about the same time share one count."""
        t = time.monotonic()
        with self._lock:
            cached = self._load.get(kind.name)
        if cached is not None and t - cached[0] < pacing.LOAD_TTL_S:
            return cached[1]
        load = queue.load(self.db, kind.queue, now)
        with self._lock:
            self._load[kind.name] = (t, load)
        return load

    def _for_idle(
        self,
        kind: WorkKind,
        limit: int,
        release: list[str],
        *,
        merge: bool = False,
        looked: bool = False,
        seen: queue.Seen | None = None,
    ) -> list[Batch]:
        """Alone, claim for this worker and the idle ones in one query: keep one batch,
        queue the rest for the workers that this wakes. No more than they can
        start at once: a resource claimed early would wait in the queue behind
        passes under way while others become due before it."""
        batches = self.claim(kind, limit, release, merge=merge, looked=looked, seen=seen)
        if len(batches) > 1:
            with self._lock:
                for b in batches[1:]:
                    self._held.update(leases.key(kind.name, u) for u in b)
                    self._queued[kind.name].append(b)
            for _ in batches[1:]:
                self._wake()
        return batches[:1]
