"""What a look at the work queue tells a conductor (`db.queue.Look`), on plain values:
which kinds of work are due and free, when something may next be claimable, and
the next time still to come (for a conductor that leaves due work to its peers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shoal.db.queue import Look

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("free", "expiry", "due", "next_at", "coming"),
    [
        ({}, None, set(), None, None),  # nothing scheduled, no lease held
        ({}, at(5), set(), at(5), at(5)),  # only a lease to expire (a crashed holder)
        ({"nodegroup": at(-1)}, None, {"nodegroup"}, at(-1), None),  # due now
        ({"nodegroup": at(0)}, None, {"nodegroup"}, at(0), None),  # due at this instant
        ({"nodegroup": at(2)}, None, set(), at(2), at(2)),  # due later
        ({"nodegroup": at(-1), "cluster": at(3)}, at(9), {"nodegroup"}, at(-1), at(3)),
        ({"nodegroup": at(4), "cluster": at(-2)}, at(1), {"cluster"}, at(-2), at(1)),
        ({"nodegroup": at(-4), "cluster": at(-2)}, None, {"nodegroup", "cluster"}, at(-4), None),
    ],
)
def test_look(
    free: dict[str, datetime],
    expiry: datetime | None,
    due: set[str],
    next_at: datetime | None,
    coming: datetime | None,
) -> None:
    look = Look(NOW, free, expiry)
    assert {k for k in ("nodegroup", "cluster") if look.due(k)} == due
    assert look.any_due == bool(due)
    assert look.next_at == next_at
    assert look.next_coming() == coming
