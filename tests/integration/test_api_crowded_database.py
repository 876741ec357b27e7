"""A PostgreSQL that has no connection to give (its limit reached: "too many
connections") makes the API answer 503 in Magnum's error shape with Retry-After,
store nothing, and serve again once connections are free; never a 500."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from shoal.settings import Settings
from tests.integration.api_support import Api, row_counts
from tests.support.databases import admin_dsn, throwaway_pg
from tests.support.server import live_server

pytestmark = pytest.mark.postgres


def _owned_by(database: str, role: str) -> None:
    """Give the database to a new role that is not a superuser (a superuser ignores
    connection limits), as a deployment's would be."""
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'ALTER DATABASE "{database}" OWNER TO "{role}"')
    with psycopg.connect(admin_dsn().replace("dbname=postgres", f"dbname={database}")) as conn:
        conn.execute(f'ALTER SCHEMA public OWNER TO "{role}"')


def _drop_role(role: str) -> None:
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def _crowd(database: str, limit: int) -> None:
    """Set the database's connection limit and drop the connections it has."""
    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" CONNECTION LIMIT {limit}')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (database,),
        )


def test_a_database_out_of_connections_is_a_503_that_changes_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with throwaway_pg() as admin_url:
        database = admin_url.rsplit("/", 1)[1]
        role = database + "_owner"
        _owned_by(database, role)
        url = admin_url.replace("//postgres@", f"//{role}@", 1)
        assert url != admin_url, admin_url
        request.addfinalizer(lambda: _drop_role(role))
        settings = Settings.from_env(
            env={}, data_dir=tmp_path, database_url=url, port=0, conductor=False
        )
        with live_server(settings) as server:
            api = Api(server, role="admin")
            api.template(name="k8s")
            before = row_counts(server)
            _crowd(database, 0)
            try:
                for method, path, body in (
                    ("GET", "/clusters", None),
                    ("POST", "/clusters", {"name": "c", "cluster_template_id": "k8s"}),
                ):
                    r = api.request(method, path, json=body)
                    assert r.status_code == 503, r.text
                    err = r.json()["errors"][0]
                    assert err["code"] == "server" and "no connection to spare" in err["detail"]
                    assert "retry" in err["detail"]
                    assert int(r.headers["Retry-After"]) > 0
            finally:
                _crowd(database, -1)
            assert row_counts(server) == before
            api.ok("GET", "/clusters")
