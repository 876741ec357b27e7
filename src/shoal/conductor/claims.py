"""Claim policy: which due work a worker takes, and the leases this process holds.

- Alone (the embedded SQLite setup, or the only live conductor), a worker claims
  for itself and the idle workers in one query and queues the extra batches for
  them; when every worker is busy with a backlog (SQLite only), it takes several
  clusters' small groups, or several clusters, in one pass.
- With peers (PostgreSQL), a worker takes one resource at a time, and no more
  than this process's fair share of the due work among the live conductors;
  work left unclaimed for a lease period is taken regardless (a slow peer).
- A worker releases the leases of its last pass in its next claim's transaction
  (one write instead of two); leases are released at once when it stops or when
  it takes queued work instead. The same transaction reads when the released
  resources are due next: this process keeps that schedule of its own work
  (`own_next`), and the loop wakes for it rather than for every due time of the
  fleet (peers wake for theirs).
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from shoal.conductor.kinds import KINDS, Batch, WorkKind
from shoal.db import leases, queue, registry
from shoal.db.engine import Database
from shoal.settings import ConductorSettings

log = logging.getLogger(__name__)

LOAD_TTL_S = 0.2  # how long one count of the due work serves this process's workers
OWN_DUE_MAX = 100_000  # due times of its own work a process remembers at most


class Take(NamedTuple):
    """What a worker's claim took."""

    batches: list[Batch]
    capped: bool  # this process holds its fair share already: peers take the rest
    due: set[str] | None  # kinds with due, free work left after the claim (None: not read)


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
        # When the resources this process passed last are due next (a heap).
        self._own_due: list[datetime] = []
        self.scheduled = 0  # the fleet's resources with a due time, at the last look

    # -- this process's own schedule ---------------------------------------------

    def requeued(self, due: list[datetime]) -> None:
        """Resources this process released are due again at `due`. Beyond its share of
        the fleet's scheduled work (as its last look counted it), it lets them go: it
        does not wake for them, and a peer with less takes them."""
        with self._lock:
            if self.live is not None and self.live > 1 and self.scheduled:
                share = -(-self.scheduled // self.live)
                due = due[: max(0, share - len(self._own_due))]
            for t in due:
                heapq.heappush(self._own_due, t)
            if len(self._own_due) > OWN_DUE_MAX:  # a bound: peers' looks cover the rest
                self._own_due = heapq.nsmallest(OWN_DUE_MAX // 2, self._own_due)

    def own_count(self) -> int:
        """How many due times of its own work this process remembers (about the
        resources it passed last and that are due again)."""
        with self._lock:
            return len(self._own_due)

    def own_next(self, now: datetime) -> datetime | None:
        """The earliest due time after `now` of the resources this process passed last
        (the times already past are dropped: their wake-up has been given)."""
        with self._lock:
            while self._own_due and self._own_due[0] <= now:
                heapq.heappop(self._own_due)
            return self._own_due[0] if self._own_due else None

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
        notes = queue.Notes()
        try:
            with self.db.core_write() as s:
                queue.release_leases(s, self.holder, keys, notes)
        except Exception:
            log.exception("%s: could not release lease", ", ".join(keys))
            return
        self.requeued(notes.requeued)

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
        self, kind: WorkKind, limit: int, release: list[str] | None = None, *, merge: bool = False
    ) -> list[Batch]:
        """Claim up to `limit` batches of due `kind` work (after releasing `release`)."""
        return self._claim(kind, limit, release, merge=merge).batches

    def _claim(
        self,
        kind: WorkKind,
        limit: int,
        release: list[str] | None,
        *,
        merge: bool = False,
        looked: bool = False,
    ) -> Take:
        notes = queue.Notes()
        try:
            batches = kind.claim(
                self.db,
                self.holder,
                self._now(),
                self.settings.lease_seconds,
                limit,
                release=release or (),
                merge=merge,
                looked=looked,
                notes=notes,
            )
        except Exception:
            self.release(release or [])  # the claim rolled back with the release in it
            raise
        self.requeued(notes.requeued)
        return Take(batches, False, notes.due)

    def due_kinds(self) -> set[str]:
        """The kinds with due, free work now (one read for all)."""
        return queue.due_kinds(self.db, self._now())

    def releasing(self) -> bool:
        """Whether this worker has leases to release (its next claim writes anyway)."""
        return bool(getattr(self._local, "release", None))

    def claim_fair(self, kind: WorkKind, due: set[str] | None = None) -> Take:
        """What one worker takes now. `due`: the kinds with due work, as this worker
        just read (None: not read; the claim looks). `capped`: this process holds
        its fair share already and peers are taking the rest."""
        release = self.take_release()
        with self._lock:
            queued = self._queued[kind.name].popleft() if self._queued[kind.name] else None
        if queued is not None:
            self.release(release)
            return Take([queued], False, None)
        looked = due is not None and not release
        if looked and kind.name not in (due or ()):
            return Take([], False, due)
        prefix = kind.name + ":"
        with self._lock:
            mine = sum(1 for k in self._held if k.startswith(prefix)) + self._claiming[kind.name]
            self._claiming[kind.name] += 1
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
                    merged = self._for_idle(kind, queue.BATCH_MAX // 2, release, merge=True)
                    return Take(merged, False, None)
                return Take(self._for_idle(kind, 1 + idle, release), False, None)
            if mine > 0 and self.live != 1 and self._over_share(kind, mine):
                self.release(release)
                return Take([], True, None)
            return self._claim(kind, 1, release, looked=looked)
        finally:
            with self._lock:
                self._claiming[kind.name] -= 1

    def _over_share(self, kind: WorkKind, mine: int) -> bool:
        """Whether `mine` resources already reach this process's share of the due work
        among the live conductors (unless some has waited a lease period)."""
        now = self._now()
        live = self.live  # the heartbeat's count (every lease / 3 s)
        if live is None:
            live = registry.live_conductors(self.db, now)
        if live <= 1:
            return False
        load = self._due(kind, now)
        share = -(-load.due // live)
        waited = (
            (now - load.oldest_unclaimed).total_seconds()
            if load.oldest_unclaimed is not None
            else 0.0
        )
        return mine >= share and waited < self.settings.lease_seconds

    def _due(self, kind: WorkKind, now: datetime) -> queue.Load:
        """The due work of `kind`, counted at most once per LOAD_TTL_S by this process:
        capped workers re-check their share 4 times a second, and one count serves
        all of them instead of one each."""
        t = time.monotonic()
        with self._lock:
            cached = self._load.get(kind.name)
        if cached is not None and t - cached[0] < LOAD_TTL_S:
            return cached[1]
        load = queue.load(self.db, kind.queue, now)
        with self._lock:
            self._load[kind.name] = (t, load)
        return load

    def _for_idle(
        self, kind: WorkKind, limit: int, release: list[str], *, merge: bool = False
    ) -> list[Batch]:
        """Alone, claim for this worker and the idle ones in one query: keep one batch,
        queue the rest for the workers that this wakes. No more than they can
        start at once: a resource claimed early would wait in the queue behind
        passes under way while others become due before it."""
        batches = self.claim(kind, limit, release, merge=merge)
        if len(batches) > 1:
            with self._lock:
                for b in batches[1:]:
                    self._held.update(leases.key(kind.name, u) for u in b)
                    self._queued[kind.name].append(b)
            for _ in batches[1:]:
                self._wake()
        return batches[:1]
