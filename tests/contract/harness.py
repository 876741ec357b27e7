"""What the contract suite needs from a driver under test: the `DriverHarness`."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.drivers import contract
from shoal.drivers.contract import Machine, MachineSpec, MachineState


class Provocation(enum.Enum):
    """An error class the contract suite makes each driver produce."""

    QUOTA = "quota"  # ensure_machine raises BlockedError(QUOTA)
    NO_VALID_HOST = "no_valid_host"  # ensure_machine raises BlockedError(NO_VALID_HOST, az)
    NO_VALID_HOST_ASYNC = "no_valid_host_async"  # the machine ends in ERROR, fault_kind NVH
    TRANSIENT = "transient"  # ensure_machine raises TransientError with a retry_after hint


# provoke(kind, spec) -> the spec to pass to ensure_machine so that it fails that way
# (the harness may change the provider's state: a quota, a fault, a full host).
Provoke = Callable[[Provocation, MachineSpec], MachineSpec]


@dataclass
class DriverHarness:
    """A driver under test plus what the suite needs to know to drive it."""

    driver: contract.Driver
    flavor: str
    image: str
    other_image: str
    zone: str
    advance: Callable[[float], None]  # let `seconds` of provider time pass
    boot_timeout: float = 120.0  # provider seconds to wait for ACTIVE
    close: Callable[[], None] = field(default=lambda: None)
    provoke: Provoke | None = None  # None: the suite skips the error-class checks

    def spec(self, **over: object) -> MachineSpec:
        """A valid spec with fresh ids; keyword arguments override fields."""
        mid = str(uuid.uuid4())
        values: dict[str, object] = dict(
            machine_id=mid,
            name=f"contract-{mid[:8]}",
            project_id="contract-project",
            cluster_id="contract-cluster",
            nodegroup_id="contract-ng",
            role="worker",
            flavor_id=self.flavor,
            image_id=self.image,
            availability_zone=self.zone,
        )
        values.update(over)
        return MachineSpec(**values)  # type: ignore[arg-type]

    def find(self, machine_id: str) -> Machine | None:
        got = self.driver.list_machines({contract.TAG_NODE: machine_id})
        return got[0] if got else None

    def wait_for(self, machine_id: str, *states: MachineState | None) -> Machine | None:
        """Let time pass until the machine is in one of `states` (None = gone)."""
        waited = 0.0
        step = max(self.boot_timeout / 100, 0.01)
        while True:
            m = self.find(machine_id)
            if (m.state if m else None) in states:
                return m
            if waited > self.boot_timeout:
                raise AssertionError(f"{machine_id} stayed {m and m.state}, wanted {states}")
            self.advance(step)
            waited += step
