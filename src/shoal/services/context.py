"""Who is asking, at which API microversion (gates some rules), and within which
limits the operator set for a request's node counts."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.domain.validation import Limits

LATEST = (1, 14)


@dataclass(frozen=True)
class Caller:
    project_id: str
    user_id: str = "admin"
    version: tuple[int, int] = LATEST
    limits: Limits = Limits()

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= (major, minor)
