"""Where new nodes of a group go: an even spread over the group's zones, and the
next listed zone when one is full ("no valid host"). Pure: no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence


def spread(zones: Sequence[str], existing: Iterable[str | None], count: int) -> list[str | None]:
    """Zones for `count` new nodes so that the group ends as even as possible.

    Each new node goes to the zone with the fewest nodes (existing ones
    included), ties broken by the order the group lists its zones. A group
    that lists no zone lets the cloud choose (None).
    """
    if not zones:
        return [None] * count
    load = Counter(z for z in existing if z in zones)
    order = {z: i for i, z in enumerate(zones)}
    out: list[str | None] = []
    for _ in range(count):
        best = min(zones, key=lambda z: (load[z], order[z]))
        load[best] += 1
        out.append(best)
    return out


def fallback(zones: Sequence[str], failed: Iterable[str]) -> str | None:
    """The next zone to try after `failed` zones had no valid host; None when all did.

    The next zone is the first listed after the most recently failed one,
    wrapping around, that has not failed yet.
    """
    tried = list(failed)
    if not zones or not tried:
        return zones[0] if zones and not tried else None
    last = tried[-1]
    start = zones.index(last) + 1 if last in zones else 0
    for i in range(len(zones)):
        z = zones[(start + i) % len(zones)]
        if z not in tried:
            return z
    return None
