"""The local driver's settings: `LocalSettings` (a provider's `settings:` with
`driver: local`) and `PreloadImage`. They are defined in shoal.settings for now, where
the config file's reader finds every driver's settings class."""

from __future__ import annotations

from shoal.settings import LocalSettings, PreloadImage

__all__ = ["LocalSettings", "PreloadImage"]
