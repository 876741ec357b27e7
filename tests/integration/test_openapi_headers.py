"""The OpenAPI document declares the identity headers only where the server reads
them: a server with SHOAL_AUTH=none, on its authenticated operations; a server with
tokens ignores them, and its document does not offer them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shoal.settings import Settings
from tests.support.server import LiveServer, live_server

IDENTITY = {"x-project-id", "x-user-id", "x-roles"}


@pytest.fixture(params=["local", "none"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, LiveServer]]:
    settings = Settings.from_env(env={"SHOAL_AUTH": request.param}, data_dir=tmp_path,
                                 port=0, conductor=False)  # fmt: skip
    with live_server(settings) as srv:
        yield request.param, srv


def _headers(op: dict[str, object]) -> set[str]:
    params = op.get("parameters") or []
    assert isinstance(params, list)
    return {str(p["name"]).lower() for p in params if p.get("in") == "header"}


def test_identity_headers_are_declared_only_where_read(served: tuple[str, LiveServer]) -> None:
    auth, srv = served
    doc = httpx.get(srv.url + "/openapi.json").json()
    ops = [
        (method, path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "responses" in op
    ]
    assert ops
    for method, path, op in ops:
        headers = _headers(op)
        assert "openstack-api-version" in headers, (method, path)
        reads_identity = auth == "none" and "security" in op
        assert (headers >= IDENTITY) == reads_identity, (method, path, headers)
        if not reads_identity:
            assert not IDENTITY & headers, (method, path, headers)


def test_a_token_server_ignores_the_identity_headers(tmp_path: Path) -> None:
    """Why they are not declared there: X-Project-Id moves nothing (asserted here, so
    the document's silence stays true)."""
    settings = Settings.from_env(env={}, data_dir=tmp_path, port=0, conductor=False)
    with live_server(settings) as srv:
        token = {"X-Auth-Token": srv.token("a", "admin")}
        mine = httpx.get(f"{srv.v1}/clusters", headers=token)
        other = httpx.get(f"{srv.v1}/clusters", headers={**token, "X-Project-Id": "b"})
        assert mine.status_code == other.status_code == 200
        assert mine.json() == other.json()
