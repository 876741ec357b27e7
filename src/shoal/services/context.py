"""Who is asking, and at which API microversion (gates some rules)."""

from __future__ import annotations

from dataclasses import dataclass

LATEST = (1, 14)


@dataclass(frozen=True)
class Caller:
    project_id: str
    user_id: str = "admin"
    version: tuple[int, int] = LATEST

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= (major, minor)
