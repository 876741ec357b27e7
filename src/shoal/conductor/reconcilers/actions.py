"""Driver calls of one pass, run in parallel on the conductor's bounded pool.

Each call goes through the provider's rate limiter; creates are also paced to
the rate the provider accepts (conductor/throttle.py) and a 429 is retried.
Creates run in waves of `driver_concurrency`; a wave that meets a quota block
stops the next waves (the rest would be refused too), and a pass stops starting
waves after a time budget (its remaining nodes are created by the next pass). "No valid host" in one
zone moves that node to the next zone its group lists, and the move is reported.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial

from shoal.conductor.context import Context
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


@dataclass
class EnsureResult:
    """What happened to one node's create."""

    spec: MachineSpec
    machine: Machine | None = None
    error: DriverError | None = None
    moves: list[tuple[str, str, str]] = field(default_factory=list)  # (from az, to az, why)


def _ensure(ctx: Context, spec: MachineSpec, zones: Sequence[str]) -> EnsureResult:
    result = EnsureResult(spec)
    tried: list[str] = []
    while True:
        try:
            result.machine = ctx.create(partial(ctx.driver.ensure_machine, result.spec))
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


def ensure_all(
    ctx: Context, specs: list[MachineSpec], zones: Sequence[str], budget: float | None = None
) -> list[EnsureResult]:
    """Create (or find) the machines of `specs` in order; stop early on a quota block,
    or once the waves so far took `budget` seconds (the rest are left for the next
    pass, so that a worker paced by the provider does not keep other groups waiting)."""
    out: list[EnsureResult] = []
    wave = max(1, ctx.settings.driver_concurrency)
    start = time.monotonic()
    for i in range(0, len(specs), wave):
        if budget is not None and out and time.monotonic() - start >= budget:
            break
        futures: list[Future[EnsureResult]] = [
            ctx.pool.submit(_ensure, ctx, spec, zones) for spec in specs[i : i + wave]
        ]
        results = [f.result() for f in futures]
        out.extend(results)
        if any(_stops(r.error) for r in results):
            break
    return out


def _stops(err: DriverError | None) -> bool:
    """Whether the remaining creates of this pass would fail the same way."""
    if isinstance(err, BlockedError):
        return err.kind is not BlockedKind.NO_VALID_HOST or err.az is None
    return isinstance(err, PermanentError | TransientError)


def delete_all(ctx: Context, machine_ids: list[str]) -> dict[str, DriverError]:
    """Delete every machine of `machine_ids` ("not found" is done); the failures."""

    def one(mid: str) -> DriverError | None:
        try:
            ctx.call(lambda: ctx.driver.delete_machine(mid))
            return None
        except DriverError as exc:
            return exc

    futures = {mid: ctx.pool.submit(one, mid) for mid in machine_ids}
    errors: dict[str, DriverError] = {}
    for mid, f in futures.items():
        err = f.result()
        if err is not None:
            errors[mid] = err
    return errors
