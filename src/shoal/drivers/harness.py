"""What the driver contract suite (tests/contract) needs from a driver under test.

A driver package ships its harnesses (`testing.HARNESSES`, named by its
`DriverKind.contract`): each makes a `DriverHarness` (the driver, a way to let
time pass, names of a flavor, image and zone it knows, how to provoke each error
class). The suite runs against every harness of every registered kind, as
httpx's transport seam ships with its own fake: a driver proves the contract
with its package, not with edits to the suite.

A driver of a real cloud (openstack, heat) ships a `CloudHarness` instead: it needs a
cloud someone made ready (a project of its own, a clouds.yaml entry, flavors and
images to name, a way to make its API refuse), which the suite brings as a
`ReadyCloud` from its own test cloud (tests/harness/openstack, tests/contract/clouds.py);
the driver's package only says what it does with one.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from shoal.drivers import contract
from shoal.drivers.contract import Machine, MachineSpec, MachineState


class Provocation(enum.Enum):
    """An error class the contract suite makes each driver produce."""

    QUOTA = "quota"  # ensure_machine raises BlockedError(QUOTA)
    NO_VALID_HOST = "no_valid_host"  # ensure_machine raises BlockedError(NO_VALID_HOST, az)
    NO_VALID_HOST_ASYNC = "no_valid_host_async"  # the machine ends in ERROR, fault_kind NVH
    TRANSIENT = "transient"  # ensure_machine raises TransientError with a retry_after hint


class Unsupported(Exception):
    """A provocation this driver cannot make, found out only when trying (the suite skips
    that check, with why). One known beforehand is declared instead (`cannot`)."""


# Provocations a harness cannot make, each with why: the suite runs a check that needs
# one only against the harnesses that can (tests/contract/conftest.py deselects the rest).
Cannot = Mapping[Provocation, str]


class Unavailable(Exception):
    """This machine lacks what the harness needs (a library, a daemon): the suite
    skips, or fails under CI where `./run test` installs it."""


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


@dataclass(frozen=True)
class ContractHarness:
    """One way to run the contract suite against a driver: `make(tmp_path)` builds the
    harness (raising Unavailable when it cannot here); `marks` name pytest markers
    (libvirt, postgres) that select or deselect its tests."""

    make: Callable[[Path], DriverHarness]
    marks: tuple[str, ...] = ()
    cannot: Cannot = field(default_factory=dict)


@dataclass(frozen=True)
class ReadyCloud:
    """A real cloud made ready for the contract suite: a project of its own, reached as
    entry `entry` of `clouds_yaml`, whose API the driver calls (Nova's for openstack,
    Heat's for heat) goes through a proxy that `refuse(count, retry_after)` makes answer
    the next `count` creates with 429 and a Retry-After; and names it offers."""

    clouds_yaml: Path
    entry: str
    flavor: str  # fits a host
    flavor_huge: str  # fits no host: the server goes to ERROR, "No valid host was found"
    flavor_over_quota: str  # more cores than the project's quota
    image: str
    other_image: str
    zone: str
    refuse: Callable[[int, float], None]

    def provoker(self) -> Callable[[Provocation, MachineSpec], MachineSpec]:
        """`provoke` for a driver of this cloud: quota and an asynchronous no valid host
        by flavor, a transient error by the proxy's 429; a synchronous no valid host is
        not something the cloud does (its harness declares so: `CloudHarness.cannot`)."""

        def provoke(kind: Provocation, spec: MachineSpec) -> MachineSpec:
            if kind is Provocation.QUOTA:
                return replace(spec, flavor_id=self.flavor_over_quota)
            if kind is Provocation.NO_VALID_HOST_ASYNC:
                return replace(spec, flavor_id=self.flavor_huge)
            if kind is Provocation.NO_VALID_HOST:
                raise Unsupported("a real cloud reports no valid host only as a server's fault")
            self.refuse(1, 2.0)  # TRANSIENT
            return spec

        return provoke

    def harness(
        self, driver: contract.Driver, boot_timeout: float, close: Callable[[], None]
    ) -> DriverHarness:
        """The harness of `driver` on this cloud, in real time."""
        return DriverHarness(
            driver=driver,
            flavor=self.flavor,
            image=self.image,
            other_image=self.other_image,
            zone=self.zone,
            advance=real_time,
            boot_timeout=boot_timeout,
            close=close,
            provoke=self.provoker(),
        )


@dataclass(frozen=True)
class CloudHarness:
    """One way to run the contract suite against a driver of a real cloud: `make(tmp_path,
    ready)` builds the harness on the `ReadyCloud` the suite brings for `cloud`
    ("openstack": Nova's API behind the proxy; "heat": Heat's, with Heat running)."""

    make: Callable[[Path, ReadyCloud], DriverHarness]
    cloud: str
    cannot: Cannot = field(default_factory=dict)


def real_time(seconds: float) -> None:
    """`advance` for drivers of real clouds: time passes by waiting."""
    time.sleep(seconds)
