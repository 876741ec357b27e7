"""What one driver instance remembers between calls: each machine's server id and
scope (from listings and creates), and the creates whose answer was lost.

A create whose answer never came (a timeout, a reset connection, a 5xx) may still
make its server: Nova stores it before it answers. Until the server shows, or the
provider's `create_settle_seconds` pass, the same machine is not created again
(`TransientError` instead). What survives a crash is not in here: after a restart
the next listing finds the server by its tags, and two servers of one node (a lost
create that landed after its retry) are reduced to one by the listing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from shoal.drivers.openstack.identity import Scope


@dataclass(frozen=True)
class Known:
    server_id: str
    scope: Scope


class Ledger:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._known: dict[str, Known] = {}
        self._lost: dict[str, float] = {}  # machine id -> when its create's answer was lost
        self._lock = threading.Lock()

    def remember(self, machine_id: str, server_id: str, scope: Scope) -> None:
        with self._lock:
            self._known[machine_id] = Known(server_id, scope)
            self._lost.pop(machine_id, None)

    def known(self, machine_id: str) -> Known | None:
        with self._lock:
            return self._known.get(machine_id)

    def forget(self, machine_id: str) -> None:
        with self._lock:
            self._known.pop(machine_id, None)
            self._lost.pop(machine_id, None)

    def lost(self, machine_id: str) -> None:
        """The create of `machine_id` got no clear answer now."""
        with self._lock:
            self._lost.setdefault(machine_id, self.clock())

    def unsettled(self, machine_id: str, settle_s: float) -> float | None:
        """Seconds since a create of `machine_id` lost its answer, while that is less
        than `settle_s` (None: no such create, or it has settled: create again)."""
        with self._lock:
            since = self._lost.get(machine_id)
            if since is None:
                return None
            age = self.clock() - since
            if age >= settle_s:
                del self._lost[machine_id]
                return None
            return age
