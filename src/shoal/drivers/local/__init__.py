"""The local driver: machines are namespace machines on the shoal host (driver.py)."""

from __future__ import annotations

from collections.abc import Callable

from shoal.drivers.local.config import LocalSettings
from shoal.drivers.local.driver import LocalDriver

__all__ = ["LocalDriver", "LocalSettings", "open_provider"]


def open_provider(settings: LocalSettings) -> tuple[LocalDriver, Callable[[], None]]:
    """The driver of one local provider. Closing it leaves its machines running: a
    restarted shoal finds them in the state dir."""
    return LocalDriver(settings), lambda: None
