"""SimDriver: the driver contract over a SimWorld, the reference every driver follows.

Each method is one world `api` call: one simulated API latency, then the action. Database
trouble (a locked SQLite file, a dropped PostgreSQL connection) is mapped to
TransientError here, at the driver's edge, as a real driver maps its SDK's errors.

With `per_group` the driver declares the PER_GROUP feature and acts like a cloud
that realises a node group as one stack (Heat): the conductor then sends each
group's desired members in one `apply_group` call instead of a call per machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

from shoal.drivers.contract import (
    Capabilities,
    Feature,
    FlavorSize,
    GroupRequest,
    Machine,
    MachineSpec,
    TransientError,
)
from shoal.drivers.sim import catalog
from shoal.drivers.sim.servers import SimServer
from shoal.drivers.sim.world import SimWorld

T = TypeVar("T")

FEATURES = frozenset({Feature.REBOOT, Feature.REBUILD})


class SimDriver:
    """The `sim` driver: machines are rows of a SimWorld (see docs/drivers.md)."""

    name = "sim"

    def __init__(self, world: SimWorld, *, per_group: bool = False) -> None:
        self.world = world
        self.features = FEATURES | {Feature.PER_GROUP} if per_group else FEATURES

    def capabilities(self) -> Capabilities:
        """Zones and restart time from the world's config (cached), flavors and images
        from the catalog."""
        cfg = self.world.cached().config
        return Capabilities(
            availability_zones=tuple(cfg.availability_zones),
            flavors=tuple(catalog.FLAVORS),
            flavor_sizes={
                f.name: FlavorSize(f.vcpus, f.ram_mb, f.disk_gb) for f in catalog.FLAVORS.values()
            },
            images=tuple(catalog.IMAGES),
            features=self.features,
            restart_seconds=cfg.restart_real_seconds(),
            pace_seconds=cfg.pace_real_seconds(),
        )

    def check(self) -> Capabilities:
        """Read the world's config now (it is the sim's "API"). TransientError when its
        database cannot be reached."""
        _edge(lambda: self.world.config())
        return self.capabilities()

    def validate(self, spec: MachineSpec) -> list[str]:
        """Unknown flavor, image, zone or option, from the in-memory catalog; never raises."""
        problems = []
        if spec.flavor_id not in catalog.FLAVORS:
            known = ", ".join(catalog.FLAVORS)
            problems.append(f"flavor {spec.flavor_id!r} does not exist (flavors: {known})")
        if spec.image_id not in catalog.IMAGES:
            known = ", ".join(catalog.IMAGES)
            problems.append(f"image {spec.image_id!r} does not exist (images: {known})")
        zones = self.world.cached().config.availability_zones  # no I/O once warm
        az = spec.availability_zone
        if az is not None and az not in zones:
            problems.append(f"availability zone {az!r} does not exist (zones: {', '.join(zones)})")
        for key in sorted(spec.options):
            problems.append(f"option {key!r} is not an option of the sim driver (it has none)")
        return problems

    def ensure_machine(self, spec: MachineSpec) -> Machine:
        """Idempotent on machine_id. Transient (429, 5xx), Blocked (quota, no valid
        host), Permanent (unknown flavor, image or zone)."""
        server: SimServer = _edge(lambda: self.world.api("create", spec.machine_id, spec))
        return server.as_machine()

    def delete_machine(self, machine_id: str) -> None:
        """Idempotent; unknown id = done. TransientError only."""
        _edge(lambda: self.world.api("delete", machine_id, machine_id))

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        """Every machine whose tags include `tags` (one query). TransientError only."""
        servers: list[SimServer] = _edge(lambda: self.world.api("list", "", tags))
        return [s.as_machine() for s in servers]

    def reboot_machine(self, machine_id: str) -> None:
        """Idempotent (a reboot under way is not restarted). Transient or Permanent."""
        _edge(lambda: self.world.api("reboot", machine_id, machine_id))

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Idempotent for the same image while it rebuilds. Transient or Permanent."""
        _edge(lambda: self.world.api("rebuild", machine_id, machine_id, image_id))

    def apply_group(self, request: GroupRequest) -> None:
        """One call for the whole group (feature PER_GROUP). Transient, Blocked or
        Permanent; what was done before a refusal stays."""
        _edge(lambda: self.world.api("apply_group", request.nodegroup_id, request))

    def delete_group(self, nodegroup_id: str) -> None:
        """Every machine of the group starts going; an unknown group is done."""
        _edge(lambda: self.world.api("delete_group", nodegroup_id, nodegroup_id))


def _edge(call: Callable[[], T]) -> T:
    """Run a world call; database trouble becomes TransientError."""
    try:
        return call()
    except (OperationalError, DBAPIError) as exc:
        raise TransientError(f"sim cloud database unavailable: {exc.orig}") from exc
