"""The outcome of a node group pass (domain/outcome.py) as tables over plain facts:
every rule, the order between any two that can hold together, the deadline, when
to look again, and how long the work has been under way."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shoal.domain import conditions as cond
from shoal.domain import outcome
from shoal.domain.model import Condition
from shoal.domain.outcome import Facts, Requeue
from shoal.domain.rollout import RolloutState as RS
from shoal.domain.rollout import Standing
from shoal.domain.status import Outcome

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
BASE = Facts(desired=3, live=3, ready=1)  # a group in progress: 1 of 3 ready
PROGRESS = "1 of 3 node(s) ready"

# For each rule, in the table's order: facts that make it hold (over BASE).
TRIGGERS: dict[str, dict[str, Any]] = {
    "permanent": {"permanent": "flavor m1.gone is unknown"},
    "lacking": {"lacking": "node n-1: the image lacks kubelet"},
    "repairs-stopped": {"repairs_stopped": "repairs stopped: 2 of 3 node(s) unhealthy"},
    "rollout-stalled": {"rollout": RS.STALLED, "rollout_note": "rollout stopped: n-4 late"},
    "complete": {"ready": 3},
    "rollout-paused": {"rollout": RS.PAUSED, "rollout_note": "1 of 3 node(s) to replace"},
    "rollout-waiting": {"rollout": RS.WAITING, "rollout_note": "waiting for the masters"},
    "blocked": {"blocked": "quota exceeded: 2 cores left", "errors": True},
    "machines-failing": {
        "wait_left": timedelta(seconds=12),
        "failures": 2,
        "last_fault": "no bootable device",
    },
    "retrying": {"transient": "503 from compute", "errors": True},
    "boot-failed": {"failed_boot": "no bootable device"},
    "rolling-out": {"rollout": RS.ROLLING, "rollout_note": "1 of 3 node(s) on the new revision"},
    "operating": {"operation_note": "operation reboot: 1 of 3 node(s) done"},
    "scaling-down": {"going": 1},
    "provider-working": {"provider_working": "stack-1"},
    "provisioning": {},
}


def facts(**changes: Any) -> Facts:
    return replace(BASE, **changes)


def test_every_rule_has_a_trigger_in_the_tables_order() -> None:
    assert list(TRIGGERS) == [r.name for r in outcome.RULES]


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_each_trigger_decides_by_its_rule(name: str) -> None:
    assert outcome.rule_for(facts(**TRIGGERS[name])).name == name


def test_between_any_two_rules_that_hold_together_the_first_wins() -> None:
    names = list(TRIGGERS)
    checked = 0
    for first, later in itertools.combinations(names, 2):
        a, b = TRIGGERS[first], TRIGGERS[later]
        if any(k in a and a[k] != b[k] for k in b):
            continue  # one field, two values: they cannot hold together
        f = facts(**a, **{k: v for k, v in b.items() if k not in a})
        rules = {r.name: r for r in outcome.RULES}
        if not (rules[first].when(f) and rules[later].when(f)):
            continue  # e.g. complete never holds with an error or a rollout under way
        assert outcome.rule_for(f).name == first, (first, later)
        checked += 1
    assert checked >= 90  # of 105 pairs: the order is really exercised (93 now)


# (facts, rule, outcome, Ready's reason, status_reason) for every rule, with its words.
TABLE: list[tuple[dict[str, Any], str, Outcome, str, str | None]] = [
    (TRIGGERS["permanent"], "permanent", Outcome.FAILED, cond.FAILED,
     "flavor m1.gone is unknown (fix the node group and retry)"),
    (TRIGGERS["lacking"], "lacking", Outcome.FAILED, cond.FAILED,
     "node n-1: the image lacks kubelet"),
    (TRIGGERS["repairs-stopped"], "repairs-stopped", Outcome.FAILED, cond.MAX_UNHEALTHY,
     "repairs stopped: 2 of 3 node(s) unhealthy"),
    (TRIGGERS["rollout-stalled"], "rollout-stalled", Outcome.FAILED, cond.ROLLOUT_STALLED,
     "rollout stopped: n-4 late"),
    (TRIGGERS["complete"], "complete", Outcome.COMPLETE, cond.AS_EXPECTED, None),
    ({"ready": 3, "rollout": RS.ABORTED, "rollout_note": "2 node(s) left on an older revision"},
     "complete", Outcome.COMPLETE, cond.AS_EXPECTED,
     "rollout aborted: 2 node(s) left on an older revision; upgrade to the previous "
     "template to roll back, or upgrade again to go on"),
    (TRIGGERS["rollout-paused"], "rollout-paused", Outcome.IN_PROGRESS, cond.ROLLOUT_PAUSED,
     f"rollout paused by request (1 of 3 node(s) to replace); resume or abort it; {PROGRESS}"),
    (TRIGGERS["rollout-waiting"], "rollout-waiting", Outcome.IN_PROGRESS,
     cond.ROLLOUT_PENDING, f"rollout waiting for the masters; {PROGRESS}"),
    (TRIGGERS["blocked"], "blocked", Outcome.IN_PROGRESS, cond.BLOCKED,
     f"BLOCKED: quota exceeded: 2 cores left; {PROGRESS}"),
    ({"full_zones": ("az-1",), "open_zones": ("az-2",), "blocked": "no valid host",
      "blocked_no_valid_host": True, "errors": True},
     "blocked", Outcome.IN_PROGRESS, cond.BLOCKED,
     "BLOCKED: no valid host in az-1 lately; placing nodes in az-2 (the cloud said: no "
     f"valid host); {PROGRESS}"),
    ({"full_zones": ("az-1", "az-2"), "wait_left": timedelta(seconds=40.4)},
     "blocked", Outcome.IN_PROGRESS, cond.BLOCKED,
     f"BLOCKED: no valid host in any zone; trying again in 40 s; {PROGRESS}"),
    (TRIGGERS["machines-failing"], "machines-failing", Outcome.IN_PROGRESS,
     cond.MACHINES_FAILING,
     f"{PROGRESS}; machines failed to boot 2 time(s) in a row, the cloud says: 'no bootable "
     "device'; trying again in 12 s (if it keeps failing, check the image, flavor, network "
     "and the cloud's capacity; nothing else is needed once the cause is fixed)"),
    (TRIGGERS["retrying"], "retrying", Outcome.IN_PROGRESS, cond.RETRYING,
     f"retrying after a transient cloud error: 503 from compute; {PROGRESS}"),
    (TRIGGERS["boot-failed"], "boot-failed", Outcome.IN_PROGRESS, cond.MACHINES_FAILING,
     f"{PROGRESS}; a machine failed to boot, the cloud says: 'no bootable device'; "
     "replacing it"),
    (TRIGGERS["rolling-out"], "rolling-out", Outcome.IN_PROGRESS, cond.ROLLING_OUT,
     f"rolling out: 1 of 3 node(s) on the new revision; {PROGRESS}"),
    (TRIGGERS["operating"], "operating", Outcome.IN_PROGRESS, cond.OPERATING,
     f"operation reboot: 1 of 3 node(s) done; {PROGRESS}"),
    (TRIGGERS["scaling-down"], "scaling-down", Outcome.IN_PROGRESS, cond.SCALING_DOWN,
     f"{PROGRESS}, 1 being deleted"),
    ({"live": 4, "ready": 4}, "scaling-down", Outcome.IN_PROGRESS, cond.SCALING_DOWN,
     "4 of 3 node(s) ready"),
    (TRIGGERS["provider-working"], "provider-working", Outcome.IN_PROGRESS,
     cond.PROVIDER_WORKING, f"{PROGRESS}; waiting for its provider to finish its work on "
     "stack-1"),
    # Its members all there and ready, its provider still at work: not complete yet.
    ({"ready": 3, "provider_working": "stack-1"}, "provider-working", Outcome.IN_PROGRESS,
     cond.PROVIDER_WORKING, "3 of 3 node(s) ready; waiting for its provider to finish its "
     "work on stack-1"),
    (TRIGGERS["provisioning"], "provisioning", Outcome.IN_PROGRESS, cond.PROVISIONING,
     PROGRESS),
    # An operation that ended this pass leaves its note on a group that is done.
    ({"ready": 3, "operation_note": "reboot done on 3 node(s)"}, "complete",
     Outcome.COMPLETE, cond.AS_EXPECTED, None),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "rule", "result", "why", "reason"), TABLE)
def test_the_table(
    changes: dict[str, Any], rule: str, result: Outcome, why: str, reason: str | None
) -> None:
    d = outcome.decide(facts(**changes))
    assert (d.rule, d.outcome, d.reason, d.status_reason) == (rule, result, why, reason)
    assert d.ready is (result is Outcome.COMPLETE)
    if rule == "complete":
        assert d.message == "3 of 3 node(s) ready"  # Ready's message: the counts
    elif rule == "permanent":
        assert d.message == "flavor m1.gone is unknown"
    else:
        assert d.message == reason


LATE = {"elapsed": timedelta(minutes=61), "limit": timedelta(minutes=60)}


@pytest.mark.parametrize(
    ("changes", "timed_out"),
    [
        ({}, True),
        (TRIGGERS["blocked"], True),
        (TRIGGERS["scaling-down"], True),
        ({"elapsed": timedelta(minutes=60)}, False),  # at the limit, not past it
        (TRIGGERS["rolling-out"], False),  # a rollout's pace is its policy's
        (TRIGGERS["rollout-paused"], False),
        (TRIGGERS["rollout-waiting"], False),
        ({"operating": True, "operation_note": "operation reboot: 0 of 3"}, False),
        (TRIGGERS["complete"], False),
        (TRIGGERS["permanent"], False),  # failed already, for its own reason
    ],
)
def test_the_deadline(changes: dict[str, Any], timed_out: bool) -> None:
    before = outcome.decide(facts(**changes))
    d = outcome.decide(facts(**{**LATE, **changes}))
    if not timed_out:
        assert d == before
        return
    assert (d.outcome, d.reason, d.requeue) == (Outcome.FAILED, cond.TIMED_OUT, Requeue.NEVER)
    assert d.rule == f"{before.rule}, timed-out"
    assert d.status_reason == d.message == f"timed out after 60 minutes: {before.status_reason}"


PACE_TABLE: list[tuple[dict[str, Any], Requeue]] = [
    (TRIGGERS["complete"], Requeue.RESYNC),
    (TRIGGERS["permanent"], Requeue.NEVER),
    (TRIGGERS["rollout-paused"], Requeue.RESYNC),  # held: nothing moves
    (TRIGGERS["rollout-waiting"], Requeue.PERIOD),
    ({"operating": True, **TRIGGERS["blocked"]}, Requeue.PERIOD),  # before the backoff
    ({"wait_left": timedelta(seconds=5), **TRIGGERS["blocked"]}, Requeue.WAIT),
    (TRIGGERS["machines-failing"], Requeue.WAIT),
    (TRIGGERS["blocked"], Requeue.BACKOFF),
    ({"progressed": True, **TRIGGERS["blocked"]}, Requeue.RECHECK),  # some went in
    ({"progressed": True, **TRIGGERS["retrying"]}, Requeue.BACKOFF),
    ({"full_zones": ("az-1",), "open_zones": ("az-2",)}, Requeue.RECHECK),
    ({"deferred": True, "progressed": True}, Requeue.AT_ONCE),
    ({"deferred": True, **TRIGGERS["retrying"]}, Requeue.BACKOFF),
    (TRIGGERS["rolling-out"], Requeue.RECHECK),
    ({"ready": 3, "provider_working": "stack-1"}, Requeue.RECHECK),  # its provider paces
    (TRIGGERS["provisioning"], Requeue.RECHECK),
]


@pytest.mark.parametrize(("changes", "requeue"), PACE_TABLE)
def test_when_to_look_again(changes: dict[str, Any], requeue: Requeue) -> None:
    assert outcome.decide(facts(**changes)).requeue is requeue


def test_every_pace_rule_decides_a_row_above() -> None:
    def first(f: Facts) -> str:
        result = outcome.decide(f).outcome
        return next(name for name, when, _ in outcome.PACE if when(f, result))

    assert {first(facts(**changes)) for changes, _ in PACE_TABLE} == {
        name for name, _, _ in outcome.PACE
    }


def _ready(status: str, at: datetime | None) -> Condition:
    return Condition(cond.READY, status, cond.PROVISIONING, "", at)


@pytest.mark.parametrize(
    ("ready", "under_way"),
    [
        (None, timedelta(0)),  # not ready from now on
        (_ready(cond.TRUE, T0 - timedelta(hours=2)), timedelta(0)),  # it was ready: a repair
        (_ready(cond.FALSE, T0 - timedelta(minutes=5)), timedelta(minutes=5)),
        (_ready(cond.FALSE, T0 - timedelta(hours=2)), timedelta(minutes=30)),  # the request
        (_ready(cond.FALSE, None), timedelta(minutes=30)),
    ],
)
def test_how_long_the_work_has_been_under_way(
    ready: Condition | None, under_way: timedelta
) -> None:
    started = T0 - timedelta(minutes=30)  # the last request
    assert outcome.elapsed(started, ready, T0) == under_way


@pytest.mark.parametrize(
    ("behind", "state", "note", "expected"),
    [
        (0, None, "", (True, cond.AS_EXPECTED, "")),
        (0, RS.ABORTED, "x", (True, cond.AS_EXPECTED, "")),
        (2, None, "", (False, cond.ROLLOUT_PENDING, "2 node(s) on an older revision")),
        (2, RS.ROLLING, "1 of 3", (False, cond.ROLLING_OUT, "1 of 3")),
        (2, RS.WAITING, "w", (False, cond.ROLLOUT_PENDING, "w")),
        (2, RS.PAUSED, "p", (False, cond.ROLLOUT_PAUSED, "p")),
        (2, RS.ABORTED, "a", (False, cond.ROLLOUT_ABORTED, "a")),
        (2, RS.STALLED, "s", (False, cond.ROLLOUT_STALLED, "s")),
    ],
)
def test_up_to_date(
    behind: int, state: RS | None, note: str, expected: tuple[bool, str, str]
) -> None:
    assert outcome.up_to_date(Standing(behind, state, note)) == expected
