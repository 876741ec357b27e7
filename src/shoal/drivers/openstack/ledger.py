"""What one driver instance remembers between calls: each machine's server id and
scope (from listings and creates), what its recent listings showed, and the creates
whose answer was lost.

A create needs to know that the machine has no server yet. The conductor lists a
node group (one request) just before it creates the group's new machines, so a
listing of this process, recent and covering the machine's tags, that did not show
the machine is that proof; without one, the create looks the machine up first.

A create whose answer never came (a timeout, a reset connection, a 5xx) may still
make its server: Nova stores it before it answers. Until the server shows, or the
provider's `create_settle_seconds` pass, the same machine is not created again
(`TransientError` instead). What survives a crash is not in here: after a restart
the next listing finds the server by its tags, and two servers of one node (a lost
create that landed after its retry) are reduced to one by the listing.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from shoal.drivers.openstack.identity import Scope


@dataclass(frozen=True)
class Known:
    server_id: str
    scope: Scope
    address: str | None = None  # the last address seen (Nova drops it while deleting)


LISTINGS_KEPT = 4096  # the most recent listings remembered (one per tag set)


class Ledger:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._known: dict[str, Known] = {}
        self._lost: dict[str, float] = {}  # machine id -> when its create's answer was lost
        # tag set -> (when it was listed, the machine ids it showed)
        self._listed: OrderedDict[frozenset[tuple[str, str]], tuple[float, frozenset[str]]]
        self._listed = OrderedDict()
        self._lock = threading.Lock()

    def listed(self, tags: Mapping[str, str], since: float, machine_ids: Iterable[str]) -> None:
        """A listing of `tags` asked at `since` showed `machine_ids`."""
        key = frozenset(tags.items())
        with self._lock:
            self._listed[key] = (since, frozenset(machine_ids))
            self._listed.move_to_end(key)
            while len(self._listed) > LISTINGS_KEPT:
                self._listed.popitem(last=False)

    def absent(self, machine_id: str, tags: Mapping[str, str], fresh_s: float) -> bool:
        """Whether a listing asked less than `fresh_s` ago, of tags that the machine's
        `tags` include, did not show it, and this process made no server for it since
        (nor lost the answer of a create)."""
        now = self.clock()
        items = sorted(tags.items())
        subsets = (
            frozenset(c) for r in range(len(items) + 1) for c in itertools.combinations(items, r)
        )
        with self._lock:
            if machine_id in self._known or machine_id in self._lost:
                return False
            for key in subsets:
                since, shown = self._listed.get(key, (float("-inf"), frozenset()))
                if now - since < fresh_s and machine_id not in shown:
                    return True
            return False

    def remember(
        self, machine_id: str, server_id: str, scope: Scope, address: str | None = None
    ) -> str | None:
        """Remember a machine's server; the address to report (the last one seen when
        the server shows none now)."""
        with self._lock:
            before = self._known.get(machine_id)
            if address is None and before is not None and before.server_id == server_id:
                address = before.address
            self._known[machine_id] = Known(server_id, scope, address)
            self._lost.pop(machine_id, None)
            return address

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
