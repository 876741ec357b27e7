"""A sim server as seen at one moment: its state is computed from stored times.

No background thread moves servers along: a row records when the server was
created, when it finishes booting and when its deletion ends, and the state is
derived whenever someone looks. That keeps the sim cheap and deterministic.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, insert, select

from shoal.drivers import contract
from shoal.drivers.contract import MachineState
from shoal.drivers.sim import tables


@dataclass(frozen=True)
class SimServer:
    """One server of the sim cloud, as the admin API and the driver report it."""

    machine_id: str
    name: str
    state: MachineState
    az: str
    address: str | None
    tags: Mapping[str, str]
    flavor: str
    image: str
    created_at: float  # simulated seconds since the epoch
    fault: str | None = None
    project: str = ""
    ready_wall: float | None = None  # real seconds since the epoch it became ready at

    def as_machine(self) -> contract.Machine:
        return contract.Machine(
            machine_id=self.machine_id,
            name=self.name,
            state=self.state,
            tags=self.tags,
            availability_zone=self.az,
            address=self.address,
            provider_id=f"sim-{self.machine_id}",
            fault=self.fault,
            image_id=self.image,
            flavor_id=self.flavor,
            fault_kind=contract.fault_kind_of(self.fault),
            ready_at=(
                dt.datetime.fromtimestamp(self.ready_wall, dt.UTC)
                if self.ready_wall is not None
                else None
            ),
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view for the admin API (created_at as ISO 8601, simulated time)."""
        created = dt.datetime.fromtimestamp(self.created_at, dt.UTC).isoformat()
        return {
            "machine_id": self.machine_id,
            "name": self.name,
            "state": str(self.state),
            "az": self.az,
            "address": self.address,
            "tags": dict(self.tags),
            "flavor": self.flavor,
            "image": self.image,
            "created_at": created,
            "fault": self.fault,
            "project": self.project,
        }


def address(seq: int) -> str:
    """The private IPv4 of the server numbered `seq`: 10.a.b.c with c in 1..254."""
    rest, c = divmod(seq, 254)
    a, b = divmod(rest, 256)
    return f"10.{a % 256}.{b}.{c + 1}"


_S = tables.servers
# The columns `view` reads, in its order.
ROW = (
    _S.c.seq, _S.c.machine_id, _S.c.name, _S.c.project, _S.c.cluster, _S.c.nodegroup,
    _S.c.node, _S.c.role, _S.c.flavor, _S.c.image, _S.c.az, _S.c.vcpus, _S.c.ram_mb,
    _S.c.created_at, _S.c.ready_at, _S.c.up_at, _S.c.fault, _S.c.deleting_at, _S.c.gone_at,
    _S.c.delete_failures,
)  # fmt: skip


def view(
    row: Sequence[Any], now: float, wall_at: Callable[[float], float] | None = None
) -> SimServer | None:
    """The SimServer for a stored row (columns in world._ROW order) at `now`; None once gone.
    `wall_at`: simulated to real time, to say when a ready server became ready."""
    (seq, mid, name, project, cluster, nodegroup, node, role, flavor, image, az, _vcpus, _ram,
     created, ready, up, fault, deleting, gone, _failures) = row  # fmt: skip
    if deleting is not None:
        if gone <= now:
            return None
        state = MachineState.DELETING
    elif now < ready:
        state = MachineState.BUILDING
    else:
        state = MachineState.ERROR if fault is not None else MachineState.ACTIVE
    error = state is MachineState.ERROR
    return SimServer(
        machine_id=mid,
        name=name,
        state=state,
        az=az,
        address=address(seq) if not error and now >= up else None,
        tags={
            contract.TAG_PROJECT: project,
            contract.TAG_CLUSTER: cluster,
            contract.TAG_NODEGROUP: nodegroup,
            contract.TAG_NODE: node,
            **({contract.TAG_ROLE: role} if role else {}),
        },
        flavor=flavor,
        image=image,
        created_at=created,
        fault=fault if error else None,
        project=project,
        ready_wall=wall_at(ready) if wall_at is not None and state is MachineState.ACTIVE else None,
    )


# A server's user data lives as long as its row: written once at its create (one
# statement), removed when its id is freed or its row purged.
_S, _UD = tables.servers, tables.user_data
ADD_USER_DATA = insert(_UD)
FORGET_USER_DATA = delete(_UD).where(_UD.c.machine_id == bindparam("mid"))
# Finished deletes are purged by whichever delete comes next; on PostgreSQL the rows
# another transaction is purging are skipped, not waited for (SKIP LOCKED: at 100,000
# servers, deletes from several processes queued on each other's purges).
_GONE = _S.c.gone_at <= bindparam("now")
PURGE_USER_DATA = delete(_UD).where(
    _UD.c.machine_id.in_(select(_S.c.machine_id).where(_GONE).with_for_update(skip_locked=True))
)
PURGE_SERVERS = delete(_S).where(
    _S.c.seq.in_(select(_S.c.seq).where(_GONE).with_for_update(skip_locked=True))
)
