"""Unexpected errors in a pass (a bug, a driver raising what the contract does not
allow): the resources wait with a growing delay instead of being due again at
once, and a `ReconcileError` condition carries the message until a pass
succeeds (every successful pass starts from conditions without it).

The delay grows with how long the resource has been failing, as kopf's error
delays do (about 1 s, then 2, 4, ... up to 10 minutes): a resource that keeps
failing is looked at about seven times in its first minute. The start of the
failure is the condition's `last_transition`, in the database, so a restart
neither resets nor loses the backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from shoal.conductor import pacing
from shoal.conductor.context import Context
from shoal.db import leases, outcomes, queue

MESSAGE_MAX = 500

log = logging.getLogger(__name__)


def delay_after(ctx: Context, failing_for: float) -> float:
    """Seconds before the next pass of a resource failing for `failing_for` seconds."""
    return ctx.backoff.jittered(min(pacing.FAILING_MAX_S, max(pacing.FAILING_FIRST_S, failing_for)))


def describe(exc: BaseException) -> str:
    """One line for an operator: the exception's class and message, bounded."""
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " ")
    if len(text) > MESSAGE_MAX:
        text = text[: MESSAGE_MAX - 3] + "..."
    return f"unexpected error in shoal's reconciler ({text}); see the conductor's log"


def record(
    ctx: Context, kind: queue.Kind, uuids: Sequence[str], exc: BaseException, started: datetime
) -> None:
    """Record the failure of a pass over `uuids`; never raises (the leases expire by
    themselves, and the next claim looks again)."""
    try:
        outcomes.record_errors(
            ctx.db,
            kind,
            uuids,
            describe(exc),
            started,
            holder=ctx.holder,
            delay=lambda waited: delay_after(ctx, waited),
        )
    except leases.LeaseLost:
        log.warning("%s: lease taken over while recording an error", kind.name)
    except Exception:
        log.exception("%s: could not record the error of a pass", kind.name)
