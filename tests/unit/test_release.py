"""Which providers release what they hold for a cluster (domain/release.py): tables."""

from __future__ import annotations

import pytest

from shoal.domain import release

RECORD = [
    # known,            added,              recorded
    ([], ["east"], ["east"]),
    ([], ["east", "west", "east"], ["east", "west"]),
    (["west"], ["east"], ["east", "west"]),
    (["east"], [None], [None, "east"]),  # None (the default) first, once
    ([None], [None], [None]),
    (None, ["east"], None),  # not known before: a part would leave providers out
    ([], [], []),
]


@pytest.mark.parametrize(("known", "added", "recorded"), RECORD)
def test_record(known: list[str | None] | None, added: list[str | None], recorded: object) -> None:
    assert release.record(known, added) == recorded


TARGETS = [
    # recorded,        releasing (configured, in order),  default, asked
    (["west"], ["east", "west"], "east", ["west"]),
    ([], ["east", "west"], "east", []),
    ([None], ["east", "west"], "east", ["east"]),  # the default, by its name
    ([None, "west"], ["west", "east"], "east", ["west", "east"]),  # configured order
    (["gone"], ["east"], "east", []),  # a provider no longer configured: nothing to ask
    (["sim"], ["east"], "sim", []),  # used a provider that releases nothing
    (None, ["east", "west"], "east", ["east", "west"]),  # not known: every one
]


@pytest.mark.parametrize(("recorded", "releasing", "default", "asked"), TARGETS)
def test_targets(
    recorded: list[str | None] | None, releasing: list[str], default: str, asked: list[str]
) -> None:
    assert release.targets(recorded, releasing, default) == asked
