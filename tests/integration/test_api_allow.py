"""A 405 says which methods the path takes (`Allow`, RFC 9110), all of them, in
Magnum's error shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_support import fast_settings
from tests.support.server import LiveServer, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("allow")
    with live_server(fast_settings(data, conductor=False)) as srv:
        yield srv


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/clusters", {"GET", "POST"}),
        ("PUT", "/clusters/x", {"GET", "PATCH", "DELETE"}),
        ("POST", "/clustertemplates/x", {"GET", "PATCH", "DELETE"}),
        ("PATCH", "/clusters", {"GET", "POST"}),
    ],
)
def test_a_405_names_every_method_of_the_path(
    server: LiveServer, method: str, path: str, allowed: set[str]
) -> None:
    token = {"X-Auth-Token": server.token(), "OpenStack-API-Version": "container-infra latest"}
    r = httpx.request(method, f"{server.v1}{path}", headers=token, json={})
    assert r.status_code == 405, r.text
    assert r.json()["errors"][0]["status"] == 405
    got = {m.strip() for m in r.headers["allow"].split(",")}
    assert allowed <= got, got
    assert method not in got
    for m in got - {"HEAD"}:  # every method named is one the path takes (not 405)
        assert httpx.request(m, f"{server.v1}{path}", headers=token).status_code != 405, m
