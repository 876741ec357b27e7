"""Nova server groups: one per placement group (one per node group), made once and
found again by name, removed once they have stayed empty.

A server group's Nova name is `<placement group>@<deployment>`, so that two
deployments sharing a project never share (or remove) each other's groups. Nova
has no name filter and no creation time on server groups: finding one lists the
project's groups, and an empty one is removed only after it was seen empty for
the provider's `server_group_grace_seconds`, by this process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from openstack.compute.v2.server_group import ServerGroup
from openstack.connection import Connection

from shoal.drivers.contract import PlacementGroup

log = logging.getLogger(__name__)


class ServerGroups:
    """The server groups of one deployment, by name, cached per process."""

    def __init__(
        self, deployment: str, grace_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.suffix = f"@{deployment}"
        self.grace_s = grace_s
        self.clock = clock
        self._ids: dict[str, str] = {}  # Nova name -> id
        self._empty_since: dict[str, float] = {}  # id -> when first seen empty
        self._lock = threading.Lock()
        self._making: dict[str, threading.Lock] = {}

    def nova_name(self, group: PlacementGroup) -> str:
        return group.name + self.suffix

    def ensure(self, conn: Connection, group: PlacementGroup) -> str:
        """The id of `group`'s server group, made when it does not exist. Raises what
        the SDK raises (a quota on server groups is a 403 the caller maps)."""
        name = self.nova_name(group)
        with self._lock:
            if name in self._ids:
                return self._ids[name]
            making = self._making.setdefault(name, threading.Lock())
        with making:  # one lookup, and at most one create, per name in this process
            with self._lock:
                if name in self._ids:
                    return self._ids[name]
            found = sorted(g.id for g in conn.compute.server_groups() if g.name == name)
            if found:
                group_id = found[0]  # several after a crash mid-create: all pick the same
            else:
                made = conn.compute.create_server_group(name=name, policy=group.policy.value)
                group_id = made.id
            with self._lock:
                self._ids[name] = group_id
            return str(group_id)

    def forget(self, group: PlacementGroup) -> None:
        """Forget a group's id (Nova said it does not exist any more)."""
        with self._lock:
            self._ids.pop(self.nova_name(group), None)

    def collect(
        self,
        conn: Connection,
        grace_s: float | None = None,
        leaving: Callable[[str], bool] | None = None,
    ) -> list[str]:
        """Delete this deployment's server groups (in `conn`'s project) that stayed
        empty for the grace period (`grace_s`, default the setting's); the names
        deleted. A member for which `leaving(server id)` is true does not count (a
        server of a cluster being released that Nova still lists while it deletes
        it). Raises what the SDK raises."""
        grace = self.grace_s if grace_s is None else grace_s
        now = self.clock()
        mine: list[ServerGroup] = [
            g for g in conn.compute.server_groups() if (g.name or "").endswith(self.suffix)
        ]
        deleted = []
        seen = set()
        for g in mine:
            seen.add(g.id)
            members = [m for m in g.member_ids or () if leaving is None or not leaving(m)]
            if members:
                self._empty_since.pop(g.id, None)
                continue
            since = self._empty_since.setdefault(g.id, now)
            if now - since < grace:
                continue
            conn.compute.delete_server_group(g.id, ignore_missing=True)
            self._empty_since.pop(g.id, None)
            with self._lock:
                if self._ids.get(g.name) == g.id:
                    del self._ids[g.name]
            deleted.append(str(g.name))
        for gone in set(self._empty_since) - seen:
            del self._empty_since[gone]
        if deleted:
            log.info("deleted %d empty server group(s): %s", len(deleted), ", ".join(deleted))
        return deleted
