"""Magnum status strings derived from the operation and its outcome (pure)."""

from shoal.domain import status as st
from shoal.domain.naming import node_name


def test_derive_keeps_the_operation_kind() -> None:
    assert st.derive("CREATE_IN_PROGRESS", st.Outcome.COMPLETE) == "CREATE_COMPLETE"
    assert st.derive("UPDATE_IN_PROGRESS", st.Outcome.FAILED) == "UPDATE_FAILED"
    assert st.derive("CREATE_COMPLETE", st.Outcome.IN_PROGRESS, deleting=True) == (
        "DELETE_IN_PROGRESS"
    )
    assert st.derive(None, st.Outcome.IN_PROGRESS) == "CREATE_IN_PROGRESS"


def test_outcome_and_failed() -> None:
    assert st.outcome_of("UPDATE_FAILED") is st.Outcome.FAILED
    assert st.is_failed("CREATE_FAILED") and not st.is_failed("CREATE_COMPLETE")
    assert st.outcome_of("weird") is None


def test_aggregate() -> None:
    c, p, f = st.Outcome.COMPLETE, st.Outcome.IN_PROGRESS, st.Outcome.FAILED
    assert st.aggregate([c, c]) is c
    assert st.aggregate([c, p]) is p
    assert st.aggregate([p, f]) is f
    assert st.aggregate([]) is c


def test_node_names_are_dns_safe_unique_and_short() -> None:
    taken = {"c-w-aaaaa"}
    seq = iter([0.0] * 5 + [0.5] * 5)
    name = node_name("c", "w", taken, rng=lambda: next(seq))
    assert name == "c-w-sssss"
    long = node_name("My_Cluster" * 10, "gpu.group", ())
    assert len(long) <= 63 and long == long.lower() and "_" not in long
