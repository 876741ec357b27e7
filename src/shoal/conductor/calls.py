"""Driver calls of a pass, run in parallel on the conductor's bounded pool.

Each call goes through its provider's limits (rate, concurrency, per target);
creates are also paced to the rate the provider accepts (conductor/throttle.py);
a 429 is not retried here: the create is `CreateRefused`, the waves stop, and its
group's pass ends due again when the refusal says (no worker sleeps it out).
Creates run in waves of `driver_concurrency`; a wave that meets a quota block
stops the next waves (the rest would be refused too). While the provider paces
creates (the throttle learned its rate), a pass starts no create after a time
budget: its remaining nodes are created by the next pass, and the worker is free
for other groups meanwhile. "No valid host" in one zone moves that node to the
next zone its group lists, and the move is reported.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial

from shoal.conductor.context import Context, Provider
from shoal.domain import placement
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    DriverError,
    Machine,
    MachineSpec,
    PermanentError,
    TransientError,
)

log = logging.getLogger(__name__)


@dataclass
class EnsureResult:
    """What happened to one node's create."""

    spec: MachineSpec
    machine: Machine | None = None
    error: DriverError | None = None
    moves: list[tuple[str, str, str]] = field(default_factory=list)  # (from az, to az, why)
    made_at: datetime | None = None  # when the provider took the create (the conductor's clock)
    # Not a driver error: something unexpected (a bug, a driver breaking its contract);
    # the caller fails the node's group alone (conductor/guard.py).
    crash: Exception | None = None


@dataclass(frozen=True)
class Ensure:
    """One machine to create (or find): its provider, its spec, and the zones its
    group may fall back to on "no valid host"."""

    provider: Provider
    spec: MachineSpec
    zones: Sequence[str]


def _ensure(ctx: Context, item: Ensure, over: Callable[[], bool]) -> EnsureResult | None:
    """Create (or find) one machine; None when the pass's budget ran out first."""
    if over():
        return None
    p, zones = item.provider, item.zones
    result = EnsureResult(item.spec)
    tried: list[str] = []
    for _ in range(len(zones) + 1):  # each zone at most once, then give up
        try:
            spec = result.spec
            make = partial(p.driver.ensure_machine, spec)
            result.machine = ctx.create(p, make, spec.availability_zone)
            result.made_at = ctx.now()
            return result
        except BlockedError as exc:
            az = exc.az
            if exc.kind is BlockedKind.NO_VALID_HOST and az is not None and az in zones:
                tried.append(az)
                nxt = placement.fallback(zones, tried)
                if nxt is not None:
                    result.moves.append((az, nxt, exc.reason))
                    result.spec = replace(result.spec, availability_zone=nxt)
                    continue
            result.error = exc
            return result
        except DriverError as exc:
            result.error = exc
            return result
        except Exception as exc:
            result.crash = exc
            return result
    return result


def ensure_all(ctx: Context, items: Sequence[Ensure], budget: float) -> list[EnsureResult]:
    """Create (or find) the machines of `items` in order; stop early on a quota block,
    or, while the provider paces creates, start none after `budget` seconds (the
    rest are left for the next pass, so that a worker waiting on the provider's
    pace does not keep other groups, the masters first, from being looked at)."""
    out: list[EnsureResult] = []
    wave = max(1, ctx.settings.driver_concurrency)
    start = time.monotonic()

    def over() -> bool:
        paced = any(p.create_throttle.rate is not None for p in ctx.providers.values())
        return paced and time.monotonic() - start >= budget

    for i in range(0, len(items), wave):
        futures: list[Future[EnsureResult | None]] = [
            ctx.pool.submit(_ensure, ctx, item, over) for item in items[i : i + wave]
        ]
        results = [r for f in futures if (r := f.result()) is not None]
        out.extend(results)
        if len(results) < len(futures) or any(_stops(r.error) for r in results):
            break
    return out


def _stops(err: DriverError | None) -> bool:
    """Whether the remaining creates of this pass would fail the same way."""
    if isinstance(err, BlockedError):
        return err.kind is not BlockedKind.NO_VALID_HOST or err.az is None
    return isinstance(err, PermanentError | TransientError)


def delete_all(
    ctx: Context,
    machines: Sequence[tuple[Provider, str, str | None]],
    crashes: dict[str, Exception] | None = None,
) -> dict[str, DriverError]:
    """Delete every machine of `machines` (provider, machine id, its zone: a target's
    limit holds for deletes too); "not found" is done. The failures, by machine id.
    `crashes`: where unexpected exceptions go, by machine id (else they are raised)."""

    def one(p: Provider, mid: str, zone: str | None) -> Exception | None:
        try:
            ctx.call(p, lambda: p.driver.delete_machine(mid), zone)
            return None
        except DriverError as exc:
            return exc
        except Exception as exc:
            if crashes is None:
                raise
            return exc

    futures = {mid: ctx.pool.submit(one, p, mid, zone) for p, mid, zone in machines}
    errors: dict[str, DriverError] = {}
    for mid, f in futures.items():
        err = f.result()
        if isinstance(err, DriverError):
            errors[mid] = err
        elif err is not None and crashes is not None:
            crashes[mid] = err
    return errors


def warm(ctx: Context) -> None:
    """Look at each driver's capabilities (a cached lookup, by the contract) once in
    this thread: a driver that keeps a connection per thread (the sim in its own
    process) opens it now, not in the middle of the first pass, where eight
    workers and 32 pool threads opening theirs at once held up the first creates."""
    for p in ctx.providers.values():
        try:
            p.driver.capabilities()
        except Exception:  # the first pass will say what is wrong
            log.debug("driver warm-up of %s failed", p.name, exc_info=True)


def warm_pool(ctx: Context) -> None:
    """`warm` in every thread of the driver pool (all started at once)."""
    n = ctx.settings.driver_concurrency
    ready = threading.Barrier(n)

    def one() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(1.0)  # hold this thread so that the next task starts another
        warm(ctx)

    for _ in range(n):
        ctx.pool.submit(one)
