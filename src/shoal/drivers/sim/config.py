"""The sim's mutable configuration: timings, rate limit, zones, capacity, quotas.

It starts from `SimSettings`, is stored as JSON in the `sim_meta` row so that
every process on one world sees the same values, and changes through `patched`
(the admin API). Simulated time is anchored here: `sim_now` maps real seconds
to simulated seconds, and a change of time_scale re-anchors so time never jumps.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.domain.errors import Invalid
from shoal.drivers.sim import catalog
from shoal.drivers.sim.settings import SimSettings

DEFAULT_AZ_CORES = 1_000_000
# Fields copied from SimSettings; when a process opens the world with settings
# that differ from those last used, these fields take the new values.
SETTINGS_FIELDS = (
    "seed",
    "time_scale",
    "boot_seconds",
    "delete_seconds",
    "api_latency_ms",
    "jitter",
    "rate_limit_per_s",
    "rate_limit_burst_s",
)
# name -> (low, high) bounds of the numeric fields the admin API may change.
_BOUNDS: dict[str, tuple[float, float]] = {
    "seed": (-(2**63), 2**63 - 1),
    "time_scale": (0.001, 1_000_000),
    "boot_seconds": (0, 86_400),
    "delete_seconds": (0, 86_400),
    "api_latency_ms": (0, 600_000),
    "jitter": (0, 1),
    "rate_limit_per_s": (0, 1_000_000),
    "rate_limit_burst_s": (0, 86_400),
}


@dataclass(frozen=True)
class Quota:
    """Per-project limits (or usage) in Nova's three classic resources."""

    instances: int = 100_000
    cores: int = 10_000_000
    ram_mb: int = 10_000_000_000

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SimConfig:
    """Everything about the sim world that is not a server, fault or quota row."""

    seed: int = 42
    time_scale: float = 1.0
    boot_seconds: float = 20.0
    delete_seconds: float = 5.0
    api_latency_ms: float = 50.0
    jitter: float = 0.2
    rate_limit_per_s: float = 0.0
    rate_limit_burst_s: float = 1.0
    availability_zones: tuple[str, ...] = catalog.DEFAULT_AZS
    az_capacity_cores: Mapping[str, int] = field(default_factory=dict)
    default_quota: Quota = field(default_factory=Quota)
    anchor_wall: float = 0.0  # real time at which simulated time was anchor_sim
    anchor_sim: float = 0.0

    @classmethod
    def from_settings(cls, s: SimSettings, wall: float) -> SimConfig:
        """A fresh world's config; simulated time starts equal to real time."""
        base = {name: getattr(s, name) for name in SETTINGS_FIELDS}
        return cls(
            **base,
            az_capacity_cores={az: DEFAULT_AZ_CORES for az in catalog.DEFAULT_AZS},
            anchor_wall=wall,
            anchor_sim=wall,
        )

    def sim_now(self, wall: float) -> float:
        """Simulated seconds at real time `wall`."""
        return self.anchor_sim + (wall - self.anchor_wall) * self.time_scale

    def wall_at(self, sim: float) -> float:
        """The real time (seconds since the epoch) of simulated time `sim`."""
        return self.anchor_wall + (sim - self.anchor_sim) / self.time_scale

    def real_seconds(self, sim_seconds: float) -> float:
        """How long `sim_seconds` of simulated time lasts in real time."""
        return sim_seconds / self.time_scale

    def restart_real_seconds(self) -> float:
        """The longest a reboot or rebuild takes, in real time: a rebuild is a boot (a
        reboot a quarter of one), at most `jitter` longer than `boot_seconds`."""
        return self.real_seconds(self.boot_seconds * (1.0 + self.jitter))

    def pace_real_seconds(self) -> float:
        """The sim's pace (`Capabilities.pace_seconds`): a tenth of its shorter move (boot
        or delete), in real time; the conductor's floor applies below it."""
        return self.real_seconds(min(self.boot_seconds, self.delete_seconds)) / 10

    @property
    def rate_burst(self) -> float:
        """Tokens the create-rate bucket holds (at least one)."""
        return max(1.0, self.rate_limit_per_s * self.rate_limit_burst_s)

    def capacity(self, az: str) -> int:
        return int(self.az_capacity_cores.get(az, DEFAULT_AZ_CORES))

    def public(self) -> dict[str, Any]:
        """The admin view: every field except the time anchors."""
        d = self.to_dict()
        del d["anchor_wall"], d["anchor_sim"]
        return d

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["availability_zones"] = list(self.availability_zones)
        d["az_capacity_cores"] = dict(self.az_capacity_cores)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> SimConfig:
        d = json.loads(raw)
        d["availability_zones"] = tuple(d["availability_zones"])
        d["default_quota"] = Quota(**d["default_quota"])
        return cls(**d)

    def rebased(self, wall: float) -> SimConfig:
        """The same config with its time anchor moved to `wall` (no time jump)."""
        return dataclasses.replace(self, anchor_wall=wall, anchor_sim=self.sim_now(wall))

    def patched(self, changes: Mapping[str, Any], wall: float) -> SimConfig:
        """Apply admin changes after checking names, types and bounds (Invalid if not)."""
        cur = self.rebased(wall)
        values: dict[str, Any] = {}
        for name, value in changes.items():
            if name in _BOUNDS:
                values[name] = _number(name, value, *_BOUNDS[name])
            elif name == "availability_zones":
                values[name] = _zones(value)
            elif name == "az_capacity_cores":
                values[name] = {**cur.az_capacity_cores, **_capacities(value)}
            elif name == "default_quota":
                values[name] = quota_from(value, cur.default_quota, field="default_quota")
            else:
                raise Invalid(f"unknown sim config field {name!r}", field=name)
        new = dataclasses.replace(cur, **values)
        caps = {az: new.capacity(az) for az in new.availability_zones}
        return dataclasses.replace(new, az_capacity_cores={**new.az_capacity_cores, **caps})


def quota_from(value: Any, base: Quota, field: str = "quota") -> Quota:
    """A Quota from a partial mapping over `base`; Invalid on unknown keys or bad values."""
    if not isinstance(value, Mapping):
        raise Invalid(f"{field} must be an object", field=field)
    out = base.as_dict()
    for k, v in value.items():
        if k not in out:
            raise Invalid(f"unknown quota resource {k!r} (instances, cores, ram_mb)", field=field)
        out[k] = int(_number(f"{field}.{k}", v, 0, 2**62))
    return Quota(**out)


def _number(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise Invalid(f"{name} must be a number", field=name)
    if not lo <= value <= hi:
        raise Invalid(f"{name}={value} is out of bounds [{lo}, {hi}]", field=name)
    return int(value) if name == "seed" else float(value)


def _zones(value: Any) -> tuple[str, ...]:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(z, str) and z for z in value)
        or len(set(value)) != len(value)
    ):
        raise Invalid("availability_zones must be a non-empty list of distinct names")
    return tuple(value)


def _capacities(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise Invalid("az_capacity_cores must map zone names to core counts")
    return {
        str(az): int(_number(f"az_capacity_cores.{az}", v, 0, 2**62)) for az, v in value.items()
    }
