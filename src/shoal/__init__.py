"""shoal: container clusters made of independently managed node groups."""

__version__ = "0.1.0"
