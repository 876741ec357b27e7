"""The per-pass guard on plain values (conductor/guard.py): who leaves the pass, and
how a shared write that fails is made again item by item."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from shoal.conductor.guard import Guard
from shoal.db import queue
from shoal.db.leases import LeaseLost

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def guard() -> Guard:
    return Guard(queue.NODEGROUP, T0)


def test_an_exception_takes_only_its_own_item_out_of_the_pass() -> None:
    g = guard()
    out = g.each(["a", "b", "c"], lambda u: {"a": 1, "c": 3}[u])  # "b": KeyError
    assert out == {"a": 1, "c": 3}
    assert list(g.failed) == ["b"] and isinstance(g.failed["b"], KeyError)
    seen: list[str] = []

    def step(u: str) -> float:
        seen.append(u)
        return 1 / (u != "c")

    kept = g.keep(["a", "b", "c"], str, step)
    assert kept == ["a"] and seen == ["a", "c"]  # "b" is out already; "c" fails now
    assert set(g.failed) == {"b", "c"} and isinstance(g.failed["c"], ZeroDivisionError)
    g.fail("c", RuntimeError("later"))
    assert isinstance(g.failed["c"], ZeroDivisionError)  # the first reason stays


def test_at_once_an_exception_takes_only_its_own_item_out_and_one_runs_in_place() -> None:
    g = guard()
    g.fail("d", RuntimeError("before"))
    threads: dict[str, str] = {}

    def fn(u: str) -> int:
        threads[u] = threading.current_thread().name
        return {"a": 1, "c": 3}[u]  # "b": KeyError

    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        assert g.each_at_once(["a", "b", "c", "d"], fn, pool) == {"a": 1, "c": 3}
        assert set(threads) == {"a", "b", "c"}  # "d" was out already
        assert all(t.startswith("pool") for t in threads.values())
        assert isinstance(g.failed["b"], KeyError)
        threads.clear()
        assert g.each_at_once(["a", "b"], fn, pool) == {"a": 1}  # "b" is out: "a" alone
    assert threads == {"a": threading.current_thread().name}


# (what each item's write does, alone) -> (written, failed, dropped)
WRITES = [
    ({"a": None, "b": None}, ["a", "b"], [], []),  # the batch's write commits: once
    ({"a": None, "b": ValueError()}, ["a"], ["b"], []),
    ({"a": LeaseLost("a"), "b": None}, ["b"], [], ["a"]),
    ({"a": ValueError(), "b": LeaseLost("b")}, [], ["a"], ["b"]),
    ({"a": ValueError()}, [], ["a"], []),  # alone: no second try
]


@pytest.mark.parametrize(("fails", "written", "failed", "dropped"), WRITES)
def test_a_shared_write_that_fails_is_made_again_item_by_item(
    fails: dict[str, Exception | None], written: list[str], failed: list[str], dropped: list[str]
) -> None:
    g = guard()
    tries: list[list[str]] = []

    def write(items: list[str]) -> None:
        tries.append(items)
        bad = next((e for i in items if (e := fails[i]) is not None), None)
        if bad is not None:
            raise bad

    assert g.written(list(fails), str, write) == written
    assert sorted(g.failed) == failed and sorted(g.dropped) == dropped
    if not failed and not dropped:
        assert tries == [list(fails)]  # one transaction
    elif len(fails) > 1:
        assert tries == [list(fails), *([i] for i in fails)]
    assert not any(g.ok(u) for u in [*failed, *dropped])


def test_items_already_out_are_not_written() -> None:
    g = guard()
    g.fail("b", KeyError("x"))
    tries: list[list[str]] = []
    assert g.written(["a", "b"], str, tries.append) == ["a"]
    assert tries == [["a"]]
    assert g.written(["b"], str, tries.append) == [] and len(tries) == 1
