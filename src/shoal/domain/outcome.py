"""The outcome of a node group pass, as ordered rule tables over plain facts.

From what a pass saw and did (`Facts`: counts, the cloud's refusals, the rollout's
state, waits, how long the work has been under way), `decide` gives the group's
outcome (IN_PROGRESS, COMPLETE or FAILED), its Ready condition, its
`status_reason` and when it wants to be looked at again. Three steps, in order:

1. `RULES`: the first rule that matches gives the outcome, Ready's status,
   reason and message, and the status_reason. A permanent error beats
   everything; a group is COMPLETE only with every desired node ready, nothing
   being deleted, no error this pass and no rollout or operation under way;
   otherwise it is in progress, and the rules say why in the cloud's own words.
2. The deadline: a group in progress outside a rollout or an operation fails
   (`TimedOut`) once the work has been under way longer than the cluster's
   `create_timeout` (a rollout's pace is its policy's: its progress deadline
   tells its stall).
3. `PACE`: the first rule that matches says when to look again, as a kind the
   conductor turns into a time with its clock, its periods and its backoff.

The conductor gathers the facts (`conductor/nodegroup/status.py`) and applies
the decision; nothing here reads a clock or the database.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shoal.domain import conditions as cond
from shoal.domain.model import Condition
from shoal.domain.rollout import RolloutState, Standing
from shoal.domain.status import Outcome


@dataclass(frozen=True, slots=True)
class Facts:
    """What a pass over one node group saw and did, as plain values."""

    desired: int  # the spec's node count
    live: int = 0  # nodes not being deleted
    ready: int = 0  # live nodes that are ready
    going: int = 0  # nodes being deleted
    errors: bool = False  # the cloud refused or failed a call this pass
    permanent: str | None = None  # a permanent error (the driver's or the spec's)
    lacking: str | None = None  # "node <name>: <what its image lacks>"
    repairs_stopped: str | None = None  # the health policy's breaker tripped: why
    rollout: RolloutState | None = None  # none: no node is behind
    rollout_note: str = ""
    operating: bool = False  # an operation is under way and did not end this pass
    operation_note: str = ""
    blocked: str | None = None  # the cloud's words when it refused for now (quota, room)
    blocked_no_valid_host: bool = False  # ... because no host had room
    full_zones: tuple[str, ...] = ()  # the group's zones without a valid host lately
    open_zones: tuple[str, ...] = ()  # the group's zones open now (read when some are full)
    wait_left: timedelta | None = None  # no create before this much time has passed
    failures: int = 0  # rounds of failed boots in a row
    last_fault: str | None = None  # the cloud's words for the last of them
    transient: str | None = None  # a transient cloud error this pass
    failed_boot: str | None = None  # the cloud's fault for a boot that failed this pass
    progressed: bool = False  # the pass asked for new machines
    deferred: bool = False  # creates left for the next pass, due at once
    # Its provider still works on the group whole (a Heat stack in progress): its ref there
    provider_working: str | None = None
    elapsed: timedelta = timedelta(0)  # how long the work has been under way
    limit: timedelta = timedelta(minutes=60)  # the cluster's create_timeout

    @property
    def rolling(self) -> bool:
        """A rollout or an operation holds the group: not done, and not timed out."""
        return (self.rollout is not None and self.rollout.holds_group) or self.operating

    @property
    def progress(self) -> str:
        """The counts, for a person: "2 of 3 node(s) ready, 1 being deleted"."""
        text = f"{self.ready} of {self.desired} node(s) ready"
        return text + (f", {self.going} being deleted" if self.going else "")


class Requeue(enum.Enum):
    """When a group wants to be looked at again."""

    NEVER = "never"  # failed: it waits for new desired state
    RESYNC = "resync"  # at rest, or held by request: the sweep period
    PERIOD = "period"  # waiting for other groups or an operation: the requeue period
    WAIT = "wait"  # when its wait ends, or sooner when nodes are booting
    BACKOFF = "backoff"  # the cloud refused or failed: a delay that grows while it does
    AT_ONCE = "at-once"  # creates left over: due at once, behind what became due meanwhile
    RECHECK = "recheck"  # when its booting nodes should be up


@dataclass(frozen=True, slots=True)
class Decision:
    """A pass's outcome: the rule that decided it and what it says."""

    rule: str
    outcome: Outcome
    ready: bool  # the Ready condition's status
    reason: str  # the Ready condition's reason (conditions.py)
    message: str  # the Ready condition's message
    status_reason: str | None
    requeue: Requeue


@dataclass(frozen=True)
class Rule:
    """When `when` holds, the group's outcome is `outcome` and its Ready condition
    (`ready`, `reason`, `message`); its status_reason is the message unless
    `status_reason` says otherwise."""

    name: str
    when: Callable[[Facts], bool]
    outcome: Outcome
    ready: bool
    reason: str
    message: Callable[[Facts], str]
    status_reason: Callable[[Facts], str | None] | None = None


def _seconds(delta: timedelta) -> str:
    return f"{max(0.0, delta.total_seconds()):.0f} s"


def _complete(f: Facts) -> bool:
    return (
        f.ready == f.desired == f.live
        and not f.going
        and not f.errors
        and not f.rolling
        and f.provider_working is None
    )


def _blocked_text(f: Facts) -> str:
    """BLOCKED: the zones without room and where nodes go instead, or the cloud's words;
    when the next try comes."""
    if f.full_zones and f.open_zones:
        text = (
            f"no valid host in {', '.join(f.full_zones)} lately; placing nodes in "
            f"{', '.join(f.open_zones)}"
        )
        if f.blocked is not None and f.blocked_no_valid_host:
            text += f" (the cloud said: {f.blocked})"
    else:
        text = f.blocked if f.blocked is not None else "no valid host in any zone"
    if f.wait_left is not None:
        text += f"; trying again in {_seconds(f.wait_left)}"
    return f"BLOCKED: {text}; {f.progress}"


def _failing_text(f: Facts) -> str:
    assert f.wait_left is not None
    return (
        f"{f.progress}; machines failed to boot {f.failures} time(s) in a row, the cloud "
        f"says: {f.last_fault!r}; trying again in {_seconds(f.wait_left)} "
        "(if it keeps failing, check the image, flavor, network and the cloud's "
        "capacity; nothing else is needed once the cause is fixed)"
    )


def _aborted_reason(f: Facts) -> str | None:
    if f.rollout is not RolloutState.ABORTED:
        return None
    return (
        f"rollout aborted: {f.rollout_note}; upgrade to the previous template to "
        "roll back, or upgrade again to go on"
    )


FAILED, COMPLETE, IN_PROGRESS = Outcome.FAILED, Outcome.COMPLETE, Outcome.IN_PROGRESS

# The outcome rules, in order: the first that matches decides.
RULES: tuple[Rule, ...] = (
    Rule("permanent", lambda f: bool(f.permanent), FAILED, False, cond.FAILED,
         lambda f: str(f.permanent),
         lambda f: f"{f.permanent} (fix the node group and retry)"),
    Rule("lacking", lambda f: f.lacking is not None, FAILED, False, cond.FAILED,
         lambda f: str(f.lacking)),
    Rule("repairs-stopped", lambda f: bool(f.repairs_stopped), FAILED, False,
         cond.MAX_UNHEALTHY, lambda f: str(f.repairs_stopped)),
    Rule("rollout-stalled", lambda f: f.rollout is RolloutState.STALLED, FAILED, False,
         cond.ROLLOUT_STALLED, lambda f: f.rollout_note),
    Rule("complete", _complete, COMPLETE, True, cond.AS_EXPECTED,
         lambda f: f.progress, _aborted_reason),
    Rule("rollout-paused", lambda f: f.rollout is RolloutState.PAUSED, IN_PROGRESS, False,
         cond.ROLLOUT_PAUSED,
         lambda f: f"rollout paused by request ({f.rollout_note}); resume or abort it; "
                   f"{f.progress}"),
    Rule("rollout-waiting", lambda f: f.rollout is RolloutState.WAITING, IN_PROGRESS, False,
         cond.ROLLOUT_PENDING, lambda f: f"rollout {f.rollout_note}; {f.progress}"),
    Rule("blocked", lambda f: f.blocked is not None or bool(f.full_zones), IN_PROGRESS,
         False, cond.BLOCKED, _blocked_text),
    Rule("machines-failing", lambda f: f.wait_left is not None and bool(f.failures),
         IN_PROGRESS, False, cond.MACHINES_FAILING, _failing_text),
    Rule("retrying", lambda f: f.transient is not None, IN_PROGRESS, False, cond.RETRYING,
         lambda f: f"retrying after a transient cloud error: {f.transient}; {f.progress}"),
    Rule("boot-failed", lambda f: f.failed_boot is not None, IN_PROGRESS, False,
         cond.MACHINES_FAILING,
         lambda f: f"{f.progress}; a machine failed to boot, the cloud says: "
                   f"{f.failed_boot!r}; replacing it"),
    Rule("rolling-out", lambda f: f.rollout is RolloutState.ROLLING, IN_PROGRESS, False,
         cond.ROLLING_OUT, lambda f: f"rolling out: {f.rollout_note}; {f.progress}"),
    Rule("operating", lambda f: bool(f.operation_note), IN_PROGRESS, False, cond.OPERATING,
         lambda f: f"{f.operation_note}; {f.progress}"),
    Rule("scaling-down", lambda f: bool(f.going) or f.live > f.desired, IN_PROGRESS, False,
         cond.SCALING_DOWN, lambda f: f.progress),
    Rule("provider-working", lambda f: f.provider_working is not None, IN_PROGRESS, False,
         cond.PROVIDER_WORKING,
         lambda f: f"{f.progress}; waiting for its provider to finish its work on "
                   f"{f.provider_working}"),
    Rule("provisioning", lambda f: True, IN_PROGRESS, False, cond.PROVISIONING,
         lambda f: f.progress),
)  # fmt: skip

# When to look again, in order: the first that matches decides.
PACE: tuple[tuple[str, Callable[[Facts, Outcome], bool], Requeue], ...] = (
    ("complete", lambda f, o: o is COMPLETE, Requeue.RESYNC),
    ("failed", lambda f, o: o is FAILED, Requeue.NEVER),
    ("paused", lambda f, o: f.rollout is RolloutState.PAUSED, Requeue.RESYNC),
    ("waiting-for-others",
     lambda f, o: f.rollout is RolloutState.WAITING or f.operating, Requeue.PERIOD),
    ("waiting", lambda f, o: f.wait_left is not None, Requeue.WAIT),
    ("refused",
     lambda f, o: (f.blocked is not None and not f.progressed) or f.transient is not None,
     Requeue.BACKOFF),
    ("deferred", lambda f, o: f.deferred, Requeue.AT_ONCE),
    ("in-progress", lambda f, o: True, Requeue.RECHECK),
)  # fmt: skip


def rule_for(f: Facts) -> Rule:
    """The first outcome rule that matches `f` (the last always does)."""
    return next(r for r in RULES if r.when(f))


def pace(f: Facts, outcome: Outcome) -> Requeue:
    """When a group with facts `f` and `outcome` wants to be looked at again."""
    return next(requeue for _, when, requeue in PACE if when(f, outcome))


def decide(f: Facts) -> Decision:
    """The pass's outcome: the first rule, then the deadline, then the pace."""
    rule = rule_for(f)
    message = rule.message(f)
    why = rule.status_reason(f) if rule.status_reason is not None else message
    if rule.outcome is IN_PROGRESS and not f.rolling and f.elapsed > f.limit:
        why = f"timed out after {f.limit.total_seconds() / 60:g} minutes: {why}"
        return Decision(
            f"{rule.name}, timed-out", FAILED, False, cond.TIMED_OUT, why, why, pace(f, FAILED)
        )
    return Decision(
        rule.name, rule.outcome, rule.ready, rule.reason, message, why, pace(f, rule.outcome)
    )


def elapsed(started: datetime, ready: Condition | None, now: datetime) -> timedelta:
    """How long the work of a group in progress has been under way at `now`: since the
    last request (`started`), or later, since the group stopped being ready on its
    own (a lost or failed machine replaced on a COMPLETE group is a repair with a
    full create_timeout of its own). `ready` is the Ready condition before this pass;
    a group in progress is not ready from now on if it was."""
    since = ready.last_transition if ready is not None and ready.status == cond.FALSE else now
    return now - (max(started, since) if since is not None else started)


# The UpToDate condition's reason for each rollout state.
_UP_TO_DATE_REASONS: dict[RolloutState, str] = {
    RolloutState.ROLLING: cond.ROLLING_OUT,
    RolloutState.WAITING: cond.ROLLOUT_PENDING,
    RolloutState.PAUSED: cond.ROLLOUT_PAUSED,
    RolloutState.ABORTED: cond.ROLLOUT_ABORTED,
    RolloutState.STALLED: cond.ROLLOUT_STALLED,
}


def up_to_date(rollout: Standing) -> tuple[bool, str, str]:
    """UpToDate (status, reason, message): is every node on the group's revision, and
    if not, what the rollout does about it."""
    if rollout.behind == 0:
        return True, cond.AS_EXPECTED, ""
    why = _UP_TO_DATE_REASONS[rollout.state or RolloutState.WAITING]
    return False, why, rollout.note or f"{rollout.behind} node(s) on an older revision"
