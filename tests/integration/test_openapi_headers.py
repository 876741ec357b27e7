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


def test_the_microversions_offered_are_the_ones_each_operation_takes(tmp_path: Path) -> None:
    """Every operation offers only versions it serves (a gated one requires the header
    and starts at its gate); one below the gate is the server's 406."""
    settings = Settings.from_env(env={}, data_dir=tmp_path, port=0, conductor=False)
    with live_server(settings) as srv:
        token = {"X-Auth-Token": srv.token("default", "admin")}
        doc = httpx.get(srv.url + "/openapi.json").json()
        gated = 0
        for path, item in doc["paths"].items():
            for method, op in item.items():
                if method not in ("get", "post", "patch", "put", "delete"):
                    continue
                (header,) = [p for p in op["parameters"] if p["name"] == "OpenStack-API-Version"]
                offered = [v for v in header["schema"]["enum"] if v != "container-infra latest"]
                url = srv.url + path.replace("{", "").replace("}", "")
                body = {"post": {}, "put": {}, "patch": []}.get(method)

                def call(version: str, m: str = method, u: str = url, b: object = body) -> int:
                    headers = {**token, "OpenStack-API-Version": version}
                    return httpx.request(m, u, headers=headers, json=b).status_code

                assert call(offered[0]) != 406, (method, path, offered[0])
                if offered[0] != "container-infra 1.1":
                    gated += 1
                    assert header["required"] is True, (method, path)
                    minor = int(offered[0].rsplit(".", 1)[1])
                    assert call(f"container-infra 1.{minor - 1}") == 406, (method, path)
        assert gated >= 8  # node groups' five operations, resize, upgrade, CA rotation
