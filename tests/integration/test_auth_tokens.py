"""Tokens of the `local` mode through the real server and the real `shoal` CLI: issued
once, kept as a digest, expiring and revoked; the `none` mode for development; and
what keeps web pages from using a shoal they can reach."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from shoal.db.tables import ApiTokenRow
from shoal.settings import Settings
from tests.integration.api_support import Api, db_of, row_counts
from tests.integration.cli_support import Shoal
from tests.support.server import LiveServer, live_server

LATEST = {"OpenStack-API-Version": "container-infra latest"}
IMAGE = "fedora-coreos-40"


def _as(server: LiveServer, token: str | None, **headers: str) -> httpx.Client:
    h = {**LATEST, **headers}
    if token is not None:
        h["X-Auth-Token"] = token
    return httpx.Client(base_url=server.v1, headers=h, timeout=30)


def test_a_token_is_shown_once_kept_as_a_digest_and_works_until_revoked(
    server: LiveServer,
) -> None:
    admin = Api(server, role="admin")
    made = admin.ok("POST", "/tokens", 201, json={
        "project_id": "team-a", "role": "member", "description": "ci"})  # fmt: skip
    token = made["token"]
    assert token.startswith("shoal_") and made["hint"] == token[:10]
    with db_of(server).read() as s:
        row = s.scalars(select(ApiTokenRow).where(ApiTokenRow.uuid == made["uuid"])).one()
        assert row.digest == hashlib.sha256(token.encode()).hexdigest()
        stored = [str(getattr(row, c.key)) for c in ApiTokenRow.__table__.columns]
        assert not any(token in value for value in stored)  # never the token itself
    listed = admin.ok("GET", "/tokens", params={"project_id": "team-a"})["tokens"]
    assert [t["uuid"] for t in listed] == [made["uuid"]]
    assert all("token" not in t for t in listed)  # never shown again
    team = _as(server, token)
    assert team.post("/clusters", json={"name": "c", "image_id": IMAGE}).status_code == 202
    assert team.get("/clusters/c").json()["project_id"] == "team-a"
    # Bearer works too (curl users, browsers' fetch).
    bearer = httpx.get(f"{server.v1}/clusters", headers={"Authorization": f"Bearer {token}"})
    assert bearer.status_code == 200
    admin.ok("DELETE", f"/tokens/{made['uuid']}", 204)
    r = team.get("/clusters")
    assert r.status_code == 401 and "revoked" in r.json()["errors"][0]["detail"]
    assert admin.ok("GET", "/tokens", params={"project_id": "team-a"})["tokens"][0]["revoked_at"]


def test_expired_unknown_and_malformed_tokens_are_401_in_magnums_shape(
    server: LiveServer,
) -> None:
    admin = Api(server, role="admin")
    made = admin.ok("POST", "/tokens", 201, json={"project_id": "p-exp", "expires": "1h"})
    expires = datetime.fromisoformat(made["expires_at"])
    assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=1)
    assert _as(server, made["token"]).get("/clusters").status_code == 200
    with db_of(server).write() as s:
        s.execute(
            update(ApiTokenRow)
            .where(ApiTokenRow.uuid == made["uuid"])
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    server.runtime.auth.forget()  # the process's cache, as after its lifetime
    for token, words in [
        (made["token"], "expired"),
        ("shoal_" + "A" * 43, "not one shoal issued"),
        ("nonsense", "malformed"),
        (None, "Authentication required"),
    ]:
        r = _as(server, token).get("/clusters")
        assert r.status_code == 401, token
        err = r.json()["errors"][0]
        assert err["status"] == 401 and words in err["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "project_id"),
        ({"project_id": "p", "role": "owner"}, "role"),
        ({"project_id": "p", "expires": "tomorrow"}, "expires"),
        ({"project_id": "p", "expires": "2001-01-01T00:00:00+00:00"}, "expires"),
        ({"project_id": "p", "expires": "2099-01-01T00:00:00"}, "time zone"),
        ({"project_id": "p", "colour": "red"}, "colour"),
    ],
)
def test_bad_token_requests_are_400_and_store_nothing(
    server: LiveServer, body: dict[str, str], field: str
) -> None:
    admin = Api(server, role="admin")
    with db_of(server).read() as s:
        before = len(list(s.scalars(select(ApiTokenRow.id))))
    r = admin.post("/tokens", json=body)
    assert r.status_code == 400 and field in r.json()["errors"][0]["detail"], r.text
    with db_of(server).read() as s:
        assert len(list(s.scalars(select(ApiTokenRow.id)))) == before


def test_the_cli_creates_lists_and_revokes_tokens(server: LiveServer) -> None:
    shoal = Shoal(server)
    made = shoal.json("token", "create", "--project", "cli-team", "--role", "reader",
                      "--expires", "90d", "--description", "dashboards")  # fmt: skip
    assert made["role"] == "reader" and made["token"].startswith("shoal_")
    rows = shoal.json("token", "list", "--project", "cli-team")
    assert [r["uuid"] for r in rows] == [made["uuid"]] and "token" not in rows[0]
    reader = _as(server, made["token"])
    assert reader.get("/clusters").status_code == 200
    assert reader.post("/clusters", json={"name": "x", "image_id": IMAGE}).status_code == 403
    assert "revoked" in shoal.ok("token", "revoke", made["uuid"]).stdout
    assert reader.get("/clusters").status_code == 401
    bad = shoal.run("token", "create", "--project", "p", "--role", "owner")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: HTTP 400") and "role" in bad.stderr
    member = Shoal(server, project="cli-team", role="member")
    denied = member.run("token", "list")
    assert denied.exit_code == 1 and "HTTP 403" in denied.stderr and "token:admin" in denied.stderr


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """SHOAL_AUTH=none, as a developer sets it explicitly."""
    data: Path = tmp_path_factory.mktemp("none")
    settings = Settings.from_env(env={"SHOAL_AUTH": "none"}, data_dir=data, port=0,
                                 conductor=False)  # fmt: skip
    with live_server(settings) as srv:
        yield srv


def test_mode_none_takes_the_project_and_roles_from_headers(open_server: LiveServer) -> None:
    a = httpx.Client(base_url=open_server.v1, headers={**LATEST, "X-Project-Id": "a"})
    b = httpx.Client(base_url=open_server.v1, headers={**LATEST, "X-Project-Id": "b"})
    made = a.post("/clusters", json={"name": "c", "image_id": IMAGE})
    assert made.status_code == 202
    assert [c["name"] for c in a.get("/clusters").json()["clusters"]] == ["c"]
    assert b.get("/clusters").json()["clusters"] == []
    assert b.get("/clusters/c").status_code == 404
    reader = {"X-Project-Id": "a", "X-Roles": "reader"}
    assert (
        a.post("/clusters", json={"name": "d", "image_id": IMAGE}, headers=reader).status_code
        == 403
    )


@pytest.mark.parametrize("header", ["X-Project-Id", "X-User-Id"])
def test_mode_none_refuses_identity_headers_longer_than_their_columns(
    open_server: LiveServer, header: str
) -> None:
    """project_id and user_id columns hold 255 characters: a longer header is a 400
    naming it (PostgreSQL refused the insert with a 500; SQLite stored it)."""
    before = row_counts(open_server)
    c = httpx.Client(base_url=open_server.v1, headers={**LATEST, header: "p" * 256})
    r = c.post("/clusters", json={"name": "x", "image_id": IMAGE})
    assert r.status_code == 400 and header in r.json()["errors"][0]["title"]
    assert "255" in r.json()["errors"][0]["title"]
    assert row_counts(open_server) == before
    ok = httpx.get(f"{open_server.v1}/clusters", headers={header: "p" * 255})
    assert ok.status_code == 200


def test_in_mode_local_identity_headers_change_nothing(server: LiveServer) -> None:
    """A token's project is the caller's: X-Project-Id cannot move a request elsewhere."""
    api = Api(server)
    r = api.post("/clusters", json={"name": "mine", "image_id": IMAGE},
                 headers={"X-Project-Id": "someone-else", "X-Roles": "admin"})  # fmt: skip
    assert r.status_code == 202
    assert api.ok("GET", "/clusters/mine")["project_id"] == api.project
    assert api.get("/quotas", params={"all_tenants": 1}, headers={"X-Roles": "admin"}
                   ).status_code == 403  # fmt: skip


@pytest.mark.parametrize(
    ("headers", "content", "status"),
    [
        ({"Content-Type": "text/plain"}, b'{"name": "x", "image_id": "i"}', 415),
        ({}, b'{"name": "x", "image_id": "i"}', 415),  # no Content-Type at all
        ({"Content-Type": "application/x-www-form-urlencoded"}, b"name=x", 415),
        ({"Content-Type": "application/json", "Origin": "https://evil.example"},
         b'{"name": "x", "image_id": "i"}', 403),
        ({"Content-Type": "application/json", "Host": "evil.example"},
         b'{"name": "x", "image_id": "i"}', 400),
    ],
)  # fmt: skip
def test_what_a_web_page_could_send_changes_nothing(
    server: LiveServer, headers: dict[str, str], content: bytes, status: int
) -> None:
    api = Api(server)
    before = row_counts(server)
    r = api.client.post("/clusters", content=content, headers=headers)
    assert r.status_code == status, r.text
    assert r.json()["errors"][0]["status"] == status
    assert row_counts(server) == before
    # The same request from a client that is not a web page is accepted.
    ok = api.client.post("/clusters", content=b'{"name": "x", "image_id": "i"}',
                         headers={"Content-Type": "application/json"})  # fmt: skip
    assert ok.status_code == 202
    api.ok("DELETE", "/clusters/x", 204)


def test_reads_need_no_origin_check_and_cors_is_off_by_default(server: LiveServer) -> None:
    api = Api(server)
    r = api.get("/clusters", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    pre = httpx.options(f"{server.v1}/clusters", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})  # fmt: skip
    assert "access-control-allow-origin" not in pre.headers


def test_cors_for_the_origins_an_operator_names(tmp_path: Path) -> None:
    settings = Settings.from_env(
        env={"SHOAL_CORS_ORIGINS": "https://dash.example.org"},
        data_dir=tmp_path, port=0, conductor=False,
    )  # fmt: skip
    with live_server(settings) as srv:
        dash = "https://dash.example.org"
        pre = httpx.options(f"{srv.v1}/clusters", headers={
            "Origin": dash, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-auth-token,content-type"})  # fmt: skip
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == dash
        token = srv.token("web", "member")
        r = httpx.post(f"{srv.v1}/clusters", json={"name": "w", "image_id": IMAGE},
                       headers={"Origin": dash, "X-Auth-Token": token})  # fmt: skip
        assert r.status_code == 202 and r.headers["access-control-allow-origin"] == dash
        r = httpx.post(
            f"{srv.v1}/clusters",
            json={"name": "e", "image_id": IMAGE},
            headers={"Origin": "https://evil.example", "X-Auth-Token": token},
        )
        assert r.status_code == 403
