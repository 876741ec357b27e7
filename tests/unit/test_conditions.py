"""Conditions keep last_transition unless their status changes (pure)."""

from datetime import UTC, datetime, timedelta

from shoal.domain import conditions as cond

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_set_adds_then_keeps_transition_on_same_status() -> None:
    c = cond.set_false((), cond.READY, cond.PROVISIONING, "0 of 3", T0)
    c = cond.set_false(c, cond.READY, cond.BLOCKED, "quota", T1)
    ready = cond.get(c, cond.READY)
    assert ready is not None
    assert (ready.status, ready.reason, ready.message) == ("False", "Blocked", "quota")
    assert ready.last_transition == T0
    assert not cond.is_true(c, cond.READY)


def test_status_change_moves_transition() -> None:
    c = cond.set_false((), cond.READY, cond.PROVISIONING, "", T0)
    c = cond.set_true(c, cond.READY, cond.AS_EXPECTED, "3 of 3", T1)
    ready = cond.get(c, cond.READY)
    assert ready is not None and ready.last_transition == T1 and cond.is_true(c, cond.READY)


def test_other_conditions_untouched_and_order_kept() -> None:
    c = cond.set_true((), cond.API_ADDRESS_KNOWN, cond.AS_EXPECTED, "x", T0)
    c = cond.set_false(c, cond.READY, cond.PROVISIONING, "", T0)
    c = cond.set_true(c, cond.API_ADDRESS_KNOWN, cond.AS_EXPECTED, "y", T1)
    assert [x.type for x in c] == [cond.API_ADDRESS_KNOWN, cond.READY]
    assert cond.remove(c, cond.READY)[0].message == "y"
    assert cond.get(c, "Nope") is None


def test_has_reason_looks_at_one_condition() -> None:
    c = cond.set_false((), cond.READY, cond.LISTING_FAILED, "cannot list", T0)
    assert cond.has_reason(c, cond.READY, cond.LISTING_FAILED)
    assert not cond.has_reason(c, cond.READY, cond.BLOCKED)
    assert not cond.has_reason(c, cond.HEALTHY, cond.LISTING_FAILED)
