"""The per-pass guard: an unexpected exception (a bug in shoal, a driver raising what
its contract does not allow) in one resource's part of a batch's pass fails that
resource alone.

A pass may take several resources together (the small node groups of one
cluster, or of several clusters on a busy SQLite conductor: `db.queue`). What
each resource does on its own (its listing, its planning, its driver calls'
answers, its outcome) runs under this guard: an exception there makes that
resource leave the pass, with the `ReconcileError` condition and the growing
delay of conductor/errors.py, and the others go on in the same pass. A write the
batch shares that fails is made again resource by resource, so a resource whose
write cannot be made fails alone too. Only what the whole batch shares (the
snapshot read, a database that does not answer) still fails the batch (loop.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from datetime import datetime
from typing import TypeVar

from shoal.conductor import errors
from shoal.conductor.context import Context
from shoal.db import leases, queue

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)


class Guard:
    """The resources of one pass that failed, and why; `record` writes their errors."""

    def __init__(self, kind: queue.Kind, started: datetime) -> None:
        self.kind = kind
        self.started = started
        self.failed: dict[str, Exception] = {}
        self.dropped: set[str] = set()  # their lease was taken over: no write, no error

    def ok(self, uuid: str) -> bool:
        """Whether `uuid` is still in the pass."""
        return uuid not in self.failed and uuid not in self.dropped

    def fail(self, uuid: str, exc: Exception) -> None:
        """`uuid` leaves the pass because of `exc` (the first reason is kept)."""
        if uuid in self.failed:
            return
        self.failed[uuid] = exc
        log.error(
            "%s: pass failed; retrying with backoff",
            leases.key(self.kind.name, uuid),
            exc_info=exc,
        )

    def each(self, uuids: Iterable[str], fn: Callable[[str], T]) -> dict[str, T]:
        """`fn(uuid)` for each resource still in the pass; those it raised for leave it."""
        out: dict[str, T] = {}
        for u in uuids:
            if not self.ok(u):
                continue
            try:
                out[u] = fn(u)
            except Exception as exc:
                self.fail(u, exc)
        return out

    def each_at_once(
        self, uuids: Iterable[str], fn: Callable[[str], T], pool: Executor
    ) -> dict[str, T]:
        """`each`, the calls at once on `pool` (a single one on the caller's thread)."""
        todo = [u for u in uuids if self.ok(u)]
        if len(todo) <= 1:
            return self.each(todo, fn)
        futures = {u: pool.submit(fn, u) for u in todo}
        return self.each(futures, lambda u: futures[u].result())

    def keep(
        self, items: Iterable[T], uuid_of: Callable[[T], str], fn: Callable[[T], R]
    ) -> list[T]:
        """Run `fn` on each item still in the pass; the items it did not raise for."""
        return [
            item for item in items if self.ok(uuid_of(item)) and self._ran(uuid_of(item), item, fn)
        ]

    def _ran(self, uuid: str, item: T, fn: Callable[[T], R]) -> bool:
        try:
            fn(item)
        except Exception as exc:
            self.fail(uuid, exc)
            return False
        return True

    def written(
        self, items: list[T], uuid_of: Callable[[T], str], write: Callable[[list[T]], R]
    ) -> list[T]:
        """Make `write` of `items` in one transaction; when it fails, once per item (it
        rolled back, so nothing was written), so that one item's bad write fails that
        item alone. The items whose write committed. A lost lease drops its item
        without an error: the conductor that took it over carries on."""
        items = [i for i in items if self.ok(uuid_of(i))]
        if not items:
            return []
        try:
            write(items)
            return items
        except Exception as exc:
            if len(items) == 1:
                self._write_failed(uuid_of(items[0]), exc)
                return []
            log.warning(
                "%s: the write of a batch of %d failed (%s); writing each alone",
                self.kind.name,
                len(items),
                errors.describe(exc),
            )
        done = []
        for item in items:
            try:
                write([item])
                done.append(item)
            except Exception as exc:
                self._write_failed(uuid_of(item), exc)
        return done

    def _write_failed(self, uuid: str, exc: Exception) -> None:
        if isinstance(exc, leases.LeaseLost):
            self.dropped.add(uuid)
            log.warning(
                "%s: lease taken over by another conductor; write dropped",
                leases.key(self.kind.name, uuid),
            )
        else:
            self.fail(uuid, exc)

    def record(self, ctx: Context) -> None:
        """Write each failed resource's `ReconcileError` and its backoff; never raises."""
        by_message: dict[str, tuple[Exception, list[str]]] = {}
        for uuid, exc in self.failed.items():
            by_message.setdefault(errors.describe(exc), (exc, []))[1].append(uuid)
        for exc, uuids in by_message.values():
            errors.record(ctx, self.kind, uuids, exc, self.started)
