"""Which providers release what they hold for a cluster once its machines are gone
(a Heat cluster stack, an API address lease): those its node groups were made in, as
the cluster row records them. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def record(
    known: Sequence[str | None] | None, added: Iterable[str | None]
) -> list[str | None] | None:
    """The cluster's providers once groups in `added` are made (None: the deployment's
    default); sorted, each once, for a stable JSON column. Unknown so far (`known` None,
    a cluster from before the column) stays unknown: a partial record would leave out
    providers its earlier groups used."""
    if known is None:
        return None
    return sorted({*known, *added}, key=lambda n: (n is not None, n or ""))


def targets(
    recorded: Sequence[str | None] | None, releasing: Sequence[str], default: str
) -> list[str]:
    """The configured providers that release things (`releasing`, in their order) to
    ask for the cluster: those it recorded (None read as `default`), every one when
    nothing was recorded. A recorded provider no longer configured is not asked (there
    is nothing to ask)."""
    if recorded is None:
        return list(releasing)
    used = {default if n is None else n for n in recorded}
    return [name for name in releasing if name in used]
