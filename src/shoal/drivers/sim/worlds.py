"""Where each sim provider of a deployment keeps its world (a database of its own)."""

from __future__ import annotations

from shoal.drivers.sim.settings import SimSettings
from shoal.settings import ProviderSettings, Settings, SettingsError


def options(provider: ProviderSettings) -> SimSettings:
    """A sim provider's settings (its defaults when it names none)."""
    got = provider.options
    return got if isinstance(got, SimSettings) else SimSettings()


def _first(settings: Settings) -> ProviderSettings | None:
    """The first sim provider that is not hosted: the world hosted providers use."""
    return next(
        (p for p in settings.providers if p.driver == "sim" and not options(p).hosted), None
    )


def first_db_url(settings: Settings) -> str | None:
    """The world of the first sim provider (what `shoal db migrate` copies), if any."""
    sim = _first(settings)
    return db_url(settings, sim) if sim is not None else None


def db_url(settings: Settings, provider: ProviderSettings) -> str:
    """Where a sim provider keeps its world: its own `database_url`, else for the
    first sim provider shoal's PostgreSQL database (row locks) or, embedded,
    `sim.db` beside shoal's file; for any other sim provider `sim-<name>.db` in
    the data directory (two providers, two worlds). SQLite has one writer per
    file, and the simulated cloud must not wait on shoal's transactions (nor
    shoal on its) any more than a real cloud does."""
    sim = options(provider)
    first = _first(settings) or provider
    if sim.hosted and provider.name != first.name:
        return db_url(settings, first)  # VMs live on the servers of that world
    if sim.database_url:
        return sim.database_url
    if provider.name == first.name:
        if settings.database_url:
            return settings.database_url
        return f"sqlite:///{settings.data_dir / 'sim.db'}"
    if settings.database_url:
        raise SettingsError(
            f"sim provider {provider.name!r} needs its own settings.database_url: "
            "two sim worlds cannot share shoal's PostgreSQL database"
        )
    return f"sqlite:///{settings.data_dir / f'sim-{provider.name}.db'}"
