"""Who is asking (a `policy.Principal`: project, user, roles), at which API
microversion (gates some rules), and within which limits the operator set for a
request's node counts."""

from __future__ import annotations

from dataclasses import dataclass

from shoal.domain.policy import Principal
from shoal.domain.validation import Limits

LATEST = (1, 14)


@dataclass(frozen=True)
class Caller(Principal):
    """A request's principal with its API microversion and node limits. Built by the
    API from the authenticated token; code that acts for the deployment itself (tests,
    tools) makes one with the default admin role."""

    version: tuple[int, int] = LATEST
    limits: Limits = Limits()

    def at_least(self, major: int, minor: int) -> bool:
        return self.version >= (major, minor)
