"""The sim driver's typed settings: a provider's `settings:` in the config file, and
the `SHOAL_SIM_*` variables (the defaults of every sim provider)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from shoal.drivers.registry import ProviderSettings
from shoal.options import opt

EMBEDDED_PROVIDER = "sim"  # the provider of a deployment without a config file
VMS_PROVIDER = "vms"  # beside it, the VMs on virt hosts (domain/virt.py)


@dataclass(frozen=True)
class SimSettings:
    """The simulated cloud (driver `sim`)."""

    seed: int = opt(42, "random seed: the same seed gives the same world and timings")
    time_scale: float = opt(
        1.0, "time compression: 100 makes a 20 s boot take 0.2 s", lo=0.001, hi=1_000_000
    )
    boot_seconds: float = opt(20.0, "mean simulated boot time (simulated seconds)", lo=0)
    delete_seconds: float = opt(5.0, "mean simulated delete time (simulated seconds)", lo=0)
    api_latency_ms: float = opt(50.0, "mean simulated latency of one API call", lo=0)
    jitter: float = opt(0.2, "relative jitter on every latency (0.2 = +/-20%)", lo=0, hi=1)
    rate_limit_per_s: float = opt(
        0.0, "create calls per simulated second before 429 (0 = unlimited)", lo=0
    )
    rate_limit_burst_s: float = opt(
        1.0, "seconds of creates the rate limit's bucket holds (burst = rate x this)", lo=0
    )
    database_url: str | None = opt(
        None,
        "where the sim keeps its world; default: sim.db in the data directory, or "
        "shoal's own database when that is PostgreSQL",
    )
    database_pool_max: int = opt(
        40, "most connections the sim holds to a PostgreSQL world at once", lo=1, hi=1000
    )
    own_process: bool = opt(
        False,
        "run the sim cloud in a child process of its own, as a real cloud runs apart "
        "from shoal (its calls then cross a local socket)",
    )
    hosted: bool = opt(
        False,
        "its machines are VMs on the virt hosts of each cluster (servers of the first sim "
        "provider's world that are nodes of a role=virt group)",
    )
    agents: bool = opt(
        False,
        "emulate a node agent on every ready server (real HTTP to shoal's API): operations "
        "and agent health work on the sim",
    )
    per_group: bool = opt(
        False,
        "act like a cloud that realises each node group as one stack (Heat): shoal then "
        "sends a group's members in one call instead of a call per machine",
    )


def embedded(defaults: SimSettings) -> list[ProviderSettings]:
    """The providers of a deployment without a config file: the sim (its settings from
    SHOAL_SIM_*) and, beside it, `vms`: VMs on the virt hosts of each cluster, in the
    same world."""
    vms = dataclasses.replace(defaults, hosted=True)
    return [
        ProviderSettings(name=EMBEDDED_PROVIDER, driver="sim", options=defaults),
        ProviderSettings(name=VMS_PROVIDER, driver="sim", options=vms),
    ]
