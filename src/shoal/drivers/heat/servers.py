"""Nova's servers of a group, read for its listing: fresh while Heat is not working on
the group's stack, and at most every STALE_S while it is.

A group Heat works on (its stack CREATE_, UPDATE_ or DELETE_IN_PROGRESS) is looked at
every second or so by the conductor, so that its stack's end is seen at once; the stack
is one cheap Heat call, but Nova's filtered `/servers/detail` is the costliest read of
the cloud, and a busy Nova (its API beside its computes) boots slower while a listing
per group per second comes in. So while the stack works, its members' servers are read
again only after STALE_S; the stack (read every time) still says when Heat is done,
and the first listing after that is fresh. A write to the group (an update, a removal,
a delete) forgets its servers: the next listing reads them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

STALE_S = 5.0  # how old a working group's servers may be
MOST = 4096  # groups remembered at once (a bound, never reached in practice)

Servers = list[dict[str, Any]]


class ServerReads:
    """Nova's servers by tag query, kept for STALE_S while the stack works."""

    def __init__(
        self, servers: Callable[[list[str]], Servers], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._servers = servers
        self._clock = clock
        self._kept: dict[str, tuple[float, Servers]] = {}
        self._lock = threading.Lock()

    def read(self, query: list[str], working: bool) -> Servers:
        """The servers `query` finds; those read less than STALE_S ago if `working`."""
        key = ",".join(query)
        now = self._clock()
        with self._lock:
            kept = self._kept.get(key)
        if working and kept is not None and now - kept[0] < STALE_S:
            return kept[1]
        found = self._servers(query)
        with self._lock:
            if not working:
                self._kept.pop(key, None)
            else:
                if len(self._kept) >= MOST:
                    self._kept.clear()
                self._kept[key] = (now, found)
        return found

    def forget(self, tag: str) -> None:
        """Forget every query that names `tag` (a group's tag, after a write to it)."""
        with self._lock:
            for key in [k for k in self._kept if tag in k.split(",")]:
                del self._kept[key]
