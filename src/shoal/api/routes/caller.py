"""/v1/auth/caller (shoal): who the token says the caller is, and what it may do.

Clients that adapt to the caller (the dashboard hides the buttons of what the policy
would refuse) ask here instead of guessing; the API still checks every request.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from shoal.api import deps
from shoal.domain import policy

router = APIRouter(tags=["meta"])


@router.get("/auth/caller")
def show_caller(request: Request) -> dict[str, Any]:
    """The caller's project, user, highest role, and the policy rules it passes."""
    who = deps.caller(request)
    return {
        "project_id": who.project_id,
        "user_id": who.user_id,
        "role": who.role,
        "allowed": sorted(rule for rule in policy.RULES if policy.allowed(who, rule)),
    }
