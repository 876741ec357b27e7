"""When a pass wants its resources looked at again, in one place: a conductor's clock,
periods and backoff as one value (`Pacing`, which the outcome phases take instead of
the whole context, so their tests need no database, pool or providers), the rule
for a group whose machines are moving (`moving_period`), and the named budgets of
the conductor (periods, caps, attempt counts, the heartbeat rule, the delays of the
health rules), each with what it paces. Not here: a driver's own protocol timing
(how long one call waits for its cloud, a hint's default) and its declared floor
(`Capabilities.pace_seconds`), in its package; the create throttle's learning
constants (`throttle.py`: its algorithm, not a budget); the rule that says a process
is up (`domain/fleet.py`, `MISSED_BEATS`: API processes report with it too).

Machines that are moving (booting, being deleted) are looked at as the group's own
history says they move: when the first of them should be done by the time learned
in the group (boots: the median of its ready nodes'; deletes: remembered in the
group's memory, `health.GroupMemory.delete_s`), and once that time has passed after a
fraction of how late they are (before anything is learned: of the time they have
taken so far), so that the listings grow apart as a wait grows long.
Bounded below by the provider's floor (its driver's `Capabilities.pace_seconds`:
seconds on a cloud, minutes on bare metal) and above by `MOVING_CAP_S`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from shoal.conductor.backoff import Backoff
from shoal.domain import health
from shoal.settings import ConductorSettings

# -- the named budgets ------------------------------------------------------------------

# Moving machines (booting, being deleted): never looked at more often than this, unless
# the conductor's requeue period is shorter (tests), nor less often than the cap.
MOVING_FLOOR_S = 0.2
MOVING_CAP_S = 30.0
# Late: looked at again after this fraction of how late (nothing learned: of the time so far).
MOVING_FRACTION = 0.25
LEARN_WEIGHT = 0.3  # a new delete time's weight in the learned one (a moving average)
# A group that has learned nothing yet expects what its provider's machines took lately
# in this process (conductor/priors.py): the PRIOR_QUANTILE of the last PRIOR_WINDOW
# boots (deletes), once PRIOR_MIN were seen. A low quantile: a group whose machines are
# quicker than most is seen done late by no more than the spread below it. 20 s boots on
# a fast cloud: 19 looks from nothing (0.2 s, then a quarter of the time so far), 4 with
# a prior of 19.5 s (one to it, then the floor's).
PRIOR_WINDOW = 64
PRIOR_MIN = 8
PRIOR_QUANTILE = 0.1
# While creates are paced by the provider's rate limit (the throttle learned a pace), a
# pass starts no create after this long (calls.ensure_all); its remaining intent rows are
# created by the next pass, due when the provider takes creates again but behind groups
# waiting longer, so that a provider's rate limit is shared by every group (no tail of
# late groups) and no group waits long for a free worker.
CREATE_PASS_BUDGET_S = 0.5
# A create refused with a hint (429) is not waited for on a worker thread: the throttle
# holds the provider's next creates, and a pass due before the hint ends waits no longer
# than this for its slot; later, its group is due again when the hint says.
CREATE_SLOT_WAIT_MAX_S = 1.0
DRAIN_POLL_S = 2.0  # a node being drained is looked at again this often
# A group its provider realises whole (one Heat stack per node group) and is working on
# (from the pass that sends its membership, or asks for its deletion, until its report
# says done or gone): looked at this often at least, as the provider brings its members
# up one by one, not when the group's learned boot time says (nodegroup/grouped.py).
GROUP_POLL_S = 1.0
# While such a provider deletes a group whole (a Heat stack delete), it is looked at this
# often. Reads of the stack once slowed Heat's deletes (four stacks deleted at once: a
# one-member stack took 47 s looked at every second, 7 s every 5 s, when a read was two
# calls to Heat's engine); read by id it is one call and its servers are read at most
# every heat/servers.py STALE_S. Every 2.5 s, then every second, ended the benchmark's
# deletes a second later than Magnum's one stack on average; every half second the
# stacks' own deletes took as long as Magnum's (29.6 s against 29.4 s for its 28
# members, docs/benchmarks.md).
GROUP_DELETE_POLL_S = 0.5
# A reboot or rebuild counts as done once the machine was seen not ready and is ready
# again, or is ready this long after the call (a reboot too quick to see), unless the
# provider says how long its restarts take (`Capabilities.restart_seconds`).
QUIET_DONE_S = 60.0
# A pass that fails unexpectedly (conductor/errors.py): its resources wait as long as
# they have been failing, at least the first and at most the last.
FAILING_FIRST_S = 1.0
FAILING_MAX_S = 600.0
# The heartbeat: leases are renewed, and the process reported alive, every third of a
# lease (two beats may be missed before a lease expires), never more often than this.
# Each process records its period in its `conductors` row, and until when it is up
# (`fleet.MISSED_BEATS` periods later: the rule the database and the API read too).
HEARTBEAT_MIN_S = 0.2
# The claims: one count of the due work serves this process's workers this long
# (claims.py: the workers that claim at about the same time share one count).
LOAD_TTL_S = 0.2
# The timekeeper of a process capped at its fair share (peers take the rest) looks again
# every half requeue period, within the poll period, never more often than this (loop.py).
CAPPED_LOOK_MIN_S = 0.25
# An idle worker that does not keep the process's time, woken by nothing at the end of
# its poll period while the timekeeper still waits, sleeps again instead of looking (the
# timekeeper looks for them all), at most this many periods in a row (loop.py).
IDLE_RESLEEPS = 60
# Failing machines (domain/health.py's rules, which take them as `HEALTH`): failed boots
# are replaced again after BOOT_RETRY_FIRST_S, doubling each round of failures, at most
# BOOT_RETRY_MAX_S (five rounds fit in a minute); a zone that had no valid host is
# avoided for ZONE_BLOCK_S.
BOOT_RETRY_FIRST_S = 3.0
BOOT_RETRY_MAX_S = 600.0
ZONE_BLOCK_S = 300.0
HEALTH = health.Delays(BOOT_RETRY_FIRST_S, BOOT_RETRY_MAX_S, ZONE_BLOCK_S)


def heartbeat_period(lease_seconds: float) -> float:
    """A third of the lease: two heartbeats may be missed before a lease expires."""
    return max(HEARTBEAT_MIN_S, lease_seconds / 3)


# -- moving machines ----------------------------------------------------------------


@dataclass(frozen=True)
class Moving:
    """Machines of one group moving one way (booting, or being deleted): how long the
    oldest of them has been at it, and how long it takes in this group as learned
    (None: not learned yet)."""

    elapsed: float
    learned: float | None = None


def moving_period(moves: Sequence[Moving], floor: float, cap: float = MOVING_CAP_S) -> float:
    """Seconds until a group whose machines move as `moves` says is looked at again:
    for each, the time left until the learned time when it is not over yet, else
    `MOVING_FRACTION` of how late it is (nothing learned: of the time taken so far),
    so that the lag after a late machine is done stays a fraction of its lateness;
    the soonest, within [floor, cap]."""
    cap = max(cap, floor)
    periods = []
    for m in moves:
        late = max(0.0, m.elapsed) - (m.learned or 0.0)
        period = -late if late < 0 else MOVING_FRACTION * late
        periods.append(min(max(period, floor), cap))
    return min(periods) if periods else floor


def prior(recent: Sequence[float]) -> float | None:
    """What a group with nothing learned expects from its provider's `recent` times: their
    `PRIOR_QUANTILE` (None with fewer than `PRIOR_MIN`)."""
    if len(recent) < PRIOR_MIN:
        return None
    ordered = sorted(recent)
    return ordered[int(PRIOR_QUANTILE * (len(ordered) - 1))]


def learned(before: float | None, seen: float) -> float:
    """The learned time after one more `seen` (a moving average; the first one as is)."""
    seen = max(0.0, seen)
    return seen if before is None else (1 - LEARN_WEIGHT) * before + LEARN_WEIGHT * seen


def floor_of(pace_seconds: float | None, requeue_seconds: float) -> float:
    """The provider's floor: its driver's declared pace, and never below the shorter of
    the conductor's requeue period and `MOVING_FLOOR_S` (a fast cloud)."""
    fast = min(requeue_seconds, MOVING_FLOOR_S)
    return max(fast, pace_seconds or 0.0)


@dataclass(frozen=True)
class Pacing:
    """The clock and the pacing policy of the passes of one conductor (`floor`: the
    floor of the provider of the group a pass is about, `for_provider`)."""

    clock: Callable[[], datetime]
    backoff: Backoff
    requeue_seconds: float  # work under way, nothing predicted: looked at this often
    sweep_seconds: float  # at rest: a resync this often
    backoff_max_seconds: float  # no retry waits longer
    pace_seconds: float | None = None  # the provider's declared pace (None: a fast cloud)
    # What its machines took lately (`prior`): the expectation of a group that has
    # learned nothing yet (None: too few seen).
    boot_prior: float | None = None
    delete_prior: float | None = None

    @classmethod
    def of(
        cls, settings: ConductorSettings, backoff: Backoff, clock: Callable[[], datetime]
    ) -> Pacing:
        return cls(
            clock,
            backoff,
            settings.requeue_seconds,
            settings.sweep_seconds,
            settings.backoff_max_seconds,
        )

    def for_provider(
        self,
        pace_seconds: float | None,
        boot_prior: float | None = None,
        delete_prior: float | None = None,
    ) -> Pacing:
        """The same policy for a group of a provider whose driver declares this pace and
        whose machines took this long lately."""
        return replace(
            self, pace_seconds=pace_seconds, boot_prior=boot_prior, delete_prior=delete_prior
        )

    @property
    def progress_seconds(self) -> float:
        """The shortest period of a group whose machines are moving (the floor)."""
        return floor_of(self.pace_seconds, self.requeue_seconds)

    def moving(self, moves: Sequence[Moving]) -> float:
        """`moving_period` with this provider's floor."""
        return moving_period(moves, self.progress_seconds)

    def at(self, now: datetime, seconds: float) -> datetime:
        """`now + seconds`, jittered by the backoff's jitter."""
        return now + timedelta(seconds=self.backoff.jittered(seconds))

    def after_waiting(self, waited: float, retry_after: float | None) -> float:
        """Seconds before a resource refused for `waited` seconds tries again (at least
        the cloud's `retry_after`, at most `backoff_max_seconds`)."""
        return min(self.backoff.after_waiting(waited, retry_after), self.backoff_max_seconds)

    def after_attempts(self, attempts: int) -> float:
        """Seconds before attempt number `attempts` (1-based), at most `backoff_max_seconds`."""
        return min(self.backoff.after_attempts(attempts), self.backoff_max_seconds)
