"""The dashboard's files under /ui/ from the real app on 127.0.0.1: strict security
headers, a fixed set of files, revalidation by ETag, no token needed for the page and
none of its data without one; GET /v1/auth/caller tells what a caller may do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shoal.settings import Settings
from shoal.web import serving
from tests.support.server import LiveServer, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("ui")
    settings = Settings.from_env(env={}, data_dir=Path(data), port=0, conductor=False)
    with live_server(settings) as s:
        yield s


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/index.html"])
def test_the_page_is_served_with_strict_headers(server: LiveServer, path: str) -> None:
    r = httpx.get(server.url + path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "style-src 'self'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert '<script type="module" src="/ui/js/main.js">' in r.text
    assert "<script>" not in r.text and "style=" not in r.text  # nothing inline


def test_modules_have_a_script_type_and_an_etag(server: LiveServer) -> None:
    r = httpx.get(server.url + "/ui/js/api.js")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    again = httpx.get(server.url + "/ui/js/api.js", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert httpx.get(server.url + "/ui/app.css").headers["content-type"].startswith("text/css")


@pytest.mark.parametrize(
    "path", ["/ui/nope.js", "/ui/../pyproject.toml", "/ui/js/../../serving.py", "/ui/%2e%2e/x"]
)
def test_only_the_dashboards_files_are_served(server: LiveServer, path: str) -> None:
    r = httpx.get(server.url + path)
    assert r.status_code == 404
    assert "import" not in r.text


def test_every_static_file_is_known() -> None:
    names = set(serving.FILES)
    assert {"index.html", "app.css", "js/main.js", "js/api.js", "js/phase.js"} <= names
    assert all(n.rsplit(".", 1)[-1] in ("html", "css", "js", "svg") for n in names)


def test_the_page_needs_no_token_but_its_data_does(server: LiveServer) -> None:
    assert httpx.get(server.url + "/ui/").status_code == 200
    assert httpx.get(server.v1 + "/auth/caller").status_code == 401


@pytest.mark.parametrize(
    ("role", "can", "cannot"),
    [
        ("reader", {"cluster:get", "operation:get"}, {"cluster:resize", "all_projects"}),
        ("member", {"cluster:resize", "cluster:delete"}, {"all_projects", "token:admin"}),
        ("admin", {"cluster:resize", "all_projects", "sim:admin"}, set()),
    ],
)
def test_the_caller_says_what_it_may_do(
    server: LiveServer, role: str, can: set[str], cannot: set[str]
) -> None:
    token = server.token("team-a", role)
    r = httpx.get(server.v1 + "/auth/caller", headers={"X-Auth-Token": token})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["project_id"] == "team-a" and body["role"] == role
    assert can <= set(body["allowed"]) and not cannot & set(body["allowed"])
