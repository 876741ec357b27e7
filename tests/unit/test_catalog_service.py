"""Which `container-infra` service of Keystone's catalog shoal points at itself
(auth/keystone.py, `service_of`): the one named as configured (`magnum`, what the
cluster-autoscaler looks up by type and name), else the first, else none (made)."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.auth.keystone import service_of

MAGNUM = {"id": "a", "name": "magnum"}
OTHER = {"id": "b", "name": "shoal"}
NAMELESS = {"id": "c"}


@pytest.mark.parametrize(
    ("services", "name", "chosen"),
    [
        ([], "magnum", None),
        ([MAGNUM], "magnum", "a"),
        ([OTHER, MAGNUM], "magnum", "a"),  # the named one, wherever it is
        ([OTHER], "magnum", "b"),  # only another: used (the log line says its name)
        ([NAMELESS, OTHER], "shoal", "b"),
        ([NAMELESS], "magnum", "c"),
    ],
)
def test_the_service_named_as_configured_is_the_one_used(
    services: list[dict[str, Any]], name: str, chosen: str | None
) -> None:
    got = service_of(services, name)
    assert (None if got is None else got["id"]) == chosen
