"""Opening a Heat provider: its driver, acting with shoal's clouds.yaml entry."""

from __future__ import annotations

from shoal.drivers.providers import Opening, Provider
from shoal.settings import SettingsError


def open_provider(opening: Opening) -> Provider:
    """The Heat provider's driver (see `DriverRuntime.open_provider`). Reads the
    clouds.yaml entry and the operator's template now (SettingsError when either cannot
    be used); calls no cloud, so a cloud that is down does not keep shoal from starting."""
    from shoal.drivers.heat import cloud, templates
    from shoal.drivers.heat.driver import HeatDriver

    ps = opening.provider
    settings = ps.options
    try:
        region = cloud.load(settings)
        the_cloud = cloud.Cloud(region)
        driver = HeatDriver(settings, the_cloud)
    except (SettingsError, templates.TemplateError) as exc:
        raise SettingsError(f"provider {ps.name!r}: {exc}") from exc
    return Provider(ps, driver, close=the_cloud.close)
