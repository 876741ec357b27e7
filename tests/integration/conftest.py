"""Fixtures of the integration layer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api_support import api_server
from tests.support.server import LiveServer


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The real API (no conductor) on SQLite, then on PostgreSQL; one per test module."""
    with api_server(request.param, tmp_path_factory.mktemp("api")) as srv:
        yield srv
