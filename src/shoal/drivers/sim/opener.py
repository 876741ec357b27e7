"""Opening a sim provider: its world (embedded, or in a process of its own) and driver,
or for a hosted provider the world of a sim provider named before it."""

from __future__ import annotations

from shoal.drivers.providers import Opening, Provider
from shoal.drivers.sim import worlds
from shoal.drivers.sim.settings import SimSettings
from shoal.settings import ProviderSettings, Settings, SettingsError


def open_provider(opening: Opening) -> Provider:
    """The sim provider's driver and world (see `DriverRuntime.open`)."""
    ps = opening.provider
    sim: SimSettings = ps.options
    if sim.hosted:
        # VMs on virt hosts: in the world the hosts are servers of (the first sim's).
        world = next((p.world for p in opening.before if p.world is not None), None)
        if world is None:
            raise SettingsError(
                f"provider {ps.name!r}: a hosted sim provider puts VMs on the servers of a sim "
                "provider named before it; name one first"
            )
        from shoal.drivers.sim.hosted import HostedSimDriver

        return Provider(
            ps, HostedSimDriver(world, opening.virt_hosts)
        )  # the world stays its host's
    from shoal.drivers.sim.driver import SimDriver

    url = worlds.db_url(opening.settings, ps)
    if sim.own_process:
        from shoal.drivers.sim.process import SimProcess

        proc = SimProcess(url, sim)
        driver = SimDriver(proc.world, per_group=sim.per_group)
        return _with_agents(Provider(ps, driver, proc.world, proc, proc.close), opening)
    from shoal.drivers.sim.world import SimWorld

    world = SimWorld.open(url, sim)
    provider = Provider(ps, SimDriver(world, per_group=sim.per_group), world, None, world.close)
    return _with_agents(provider, opening)


def _with_agents(provider: Provider, opening: Opening) -> Provider:
    """With `agents: true`, an emulated node agent on every ready server (real HTTP to
    shoal's API), started with the process."""
    if provider.world is not None and provider.settings.options.agents:
        from shoal.drivers.sim.agents import EmulatedAgents

        state = opening.settings.data_dir / f"sim-agents-{provider.name}"
        provider.companions.append(EmulatedAgents(provider.world, state, opening.settings.api_url))
    return provider


def databases(settings: Settings, provider: ProviderSettings) -> list[str]:
    """The database the provider keeps its world in."""
    return [worlds.db_url(settings, provider)]
