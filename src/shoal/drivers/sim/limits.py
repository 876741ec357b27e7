"""Natural limits of the sim cloud: project quotas and per-zone host capacity.

Both read running usage counters (sim_usage), never the server table, and
explain a refusal with numbers so that a person knows what to raise or free.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.drivers.contract import BlockedError, BlockedKind
from shoal.drivers.sim.config import Quota, SimConfig
from shoal.drivers.sim.faults import unit


def quota_error(limit: Quota, used: Quota, need: Quota, project: str) -> BlockedError | None:
    for res in ("instances", "cores", "ram_mb"):
        u, lim, n = getattr(used, res), getattr(limit, res), getattr(need, res)
        if u + n > lim:
            return BlockedError(
                f"quota exceeded: {res} {u} of {lim} in use, {n} more requested "
                f"(project {project})",
                BlockedKind.QUOTA,
            )
    return None


def pick_zone(
    cfg: SimConfig, used: Mapping[tuple[str, str], Quota], key: str, vcpus: int
) -> str | None:
    """A zone with room for `vcpus`, chosen by hash so that one seed gives one layout."""
    fits = [z for z in cfg.availability_zones if used[("az", z)].cores + vcpus <= cfg.capacity(z)]
    return fits[int(unit(cfg.seed, "az", key) * len(fits))] if fits else None


def capacity_error(
    cfg: SimConfig, used: Mapping[tuple[str, str], Quota], az: str | None, asked: str | None,
    vcpus: int,
) -> BlockedError | None:  # fmt: skip
    zones = [az] if az is not None else list(cfg.availability_zones)
    full = [z for z in zones if used[("az", z)].cores + vcpus > cfg.capacity(z)]
    if not full:
        return None
    detail = "; ".join(
        f"{z}: cores {used[('az', z)].cores} of {cfg.capacity(z)} in use" for z in full
    )
    where = f"in {az}" if asked is not None else "in any availability zone"
    return BlockedError(
        f"No valid host was found {where} ({detail}; {vcpus} cores requested)",
        BlockedKind.NO_VALID_HOST,
        az=asked,
    )
