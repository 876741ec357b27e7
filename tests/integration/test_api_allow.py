"""A 405 says which methods the path takes (`Allow`, RFC 9110), all of them, in
Magnum's error shape."""

from __future__ import annotations

import re
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
        ("PUT", "/quotas/a/Cluster", {"GET", "PATCH", "DELETE"}),
        ("DELETE", "/quotas", {"GET", "POST"}),
        ("PATCH", "/tokens", {"GET", "POST"}),
        ("GET", "/tokens/x", {"DELETE"}),
        ("GET", "/orphans/adopt", {"POST", "DELETE"}),
        ("POST", "/certificates/x", {"GET", "PATCH"}),
        ("PUT", "/clusters/x/operations", {"GET", "POST"}),
        ("GET", "/clusters/x/actions/upgrade", {"POST"}),
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


def test_every_documented_path_answers_an_undocumented_method_with_405_and_allow(
    server: LiveServer,
) -> None:
    token = {"X-Auth-Token": server.token(), "OpenStack-API-Version": "container-infra latest"}
    doc = httpx.get(f"{server.url}/openapi.json").json()
    methods = ("GET", "POST", "PUT", "PATCH", "DELETE")
    concrete: dict[str, set[str]] = {}
    for template, operations in doc["paths"].items():
        path = re.sub(r"\{[^}]+\}", "x", template)
        concrete.setdefault(path, set()).update(m.upper() for m in operations)
    missing = []
    for path, declared in sorted(concrete.items()):
        # another template may take the same concrete path (/orphans/adopt, /orphans/{id})
        taken = set().union(*(d for p, d in concrete.items() if _same(p, path)))
        method = next((m for m in methods if m not in taken), None)
        if method is None:
            continue
        r = httpx.request(method, f"{server.url}{path}", headers=token)
        if r.status_code != 405 or not r.headers.get("allow"):
            missing.append(f"{method} {path}: {r.status_code} allow={r.headers.get('allow')}")
        elif r.json()["errors"][0]["status"] != 405:
            missing.append(f"{method} {path}: not Magnum's error shape: {r.text[:200]}")
        else:
            assert declared <= {m.strip() for m in r.headers["allow"].split(",")}, path
    assert not missing, "\n".join(missing)
    assert len(concrete) > 30  # the document was read


def _same(a: str, b: str) -> bool:
    x, y = a.split("/"), b.split("/")
    return len(x) == len(y) and all(p == q or "x" in (p, q) for p, q in zip(x, y, strict=True))
