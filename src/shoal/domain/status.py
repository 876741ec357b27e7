"""Magnum status strings, derived for compatibility from what the conductor observed.

The API writes `<OP>_IN_PROGRESS` when it accepts new desired state, so the
operation kind (CREATE, UPDATE, DELETE) is the prefix of the current status;
the conductor only decides the outcome: IN_PROGRESS, COMPLETE or FAILED.
"""

from __future__ import annotations

import enum

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
KINDS = (CREATE, UPDATE, DELETE)


class Outcome(enum.StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


def kind_of(status: str | None, *, deleting: bool = False) -> str:
    """The operation a status string names; DELETE whenever the resource is deleting."""
    if deleting:
        return DELETE
    if status:
        head = status.split("_", 1)[0]
        if head in KINDS:
            return head
        if head == "RESUME" or head == "ROLLBACK":
            return UPDATE
    return CREATE


def derive(current: str | None, outcome: Outcome, *, deleting: bool = False) -> str:
    """E.g. derive("CREATE_IN_PROGRESS", Outcome.COMPLETE) == "CREATE_COMPLETE"."""
    return f"{kind_of(current, deleting=deleting)}_{outcome}"


def outcome_of(status: str | None) -> Outcome | None:
    """The outcome a status string names, if it is one of ours."""
    if not status:
        return None
    for o in Outcome:
        if status.endswith("_" + o.value):
            return o
    return None


def is_failed(status: str | None) -> bool:
    """Whether `status` is a *_FAILED string."""
    return outcome_of(status) is Outcome.FAILED


def aggregate(outcomes: list[Outcome]) -> Outcome:
    """The outcome of a cluster from its node groups': any failed -> FAILED, all
    complete -> COMPLETE, else IN_PROGRESS. No groups at all counts as complete."""
    if any(o is Outcome.FAILED for o in outcomes):
        return Outcome.FAILED
    if all(o is Outcome.COMPLETE for o in outcomes):
        return Outcome.COMPLETE
    return Outcome.IN_PROGRESS
