"""Helpers for API tests: a live server per database kind, a small HTTP client
that speaks for one project, row counts, and node rows seeded as the conductor
would write them (the API never writes nodes)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from shoal.db.engine import Database
from shoal.db.tables import Base, NodeGroupRow, NodeRow
from shoal.db.types import utcnow
from shoal.settings import Settings
from tests.support.databases import throwaway_pg
from tests.support.server import LiveServer, live_server

LATEST = {"OpenStack-API-Version": "container-infra latest"}


@contextmanager
def api_server(kind: str, tmp: Path) -> Iterator[LiveServer]:
    """The real server on 127.0.0.1 (no conductor) over SQLite or a throwaway PostgreSQL."""
    if kind == "sqlite":
        settings = Settings.from_env(env={}, data_dir=tmp, port=0, conductor=False)
        with live_server(settings) as server:
            yield server
    else:
        with throwaway_pg() as url:
            settings = Settings.from_env(
                env={}, data_dir=tmp, database_url=url, port=0, conductor=False
            )
            with live_server(settings) as server:
                yield server


class Api:
    """httpx against /v1 as one project with one role (a fresh project per test isolates
    tests), authenticated by a token of the server's own."""

    def __init__(
        self,
        server: LiveServer,
        project: str | None = None,
        version: str = "latest",
        role: str = "member",
    ):
        self.server = server
        self.project = project or f"p-{uuid.uuid4().hex[:8]}"
        self.role = role
        self.token = server.token(self.project, role)
        self.client = httpx.Client(
            base_url=server.v1,
            timeout=30,
            headers={
                "X-Auth-Token": self.token,
                "OpenStack-API-Version": f"container-infra {version}",
            },
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def ok(self, method: str, path: str, status: int = 200, **kw: Any) -> Any:
        """Call and assert the status; the JSON body (or None)."""
        r = self.client.request(method, path, **kw)
        assert r.status_code == status, (r.status_code, r.text)
        return r.json() if r.content else None

    def template(self, name: str = "k8s", **attrs: Any) -> dict[str, Any]:
        body = {"name": name, "coe": "kubernetes", "image_id": "fedora-coreos-40", **attrs}
        return dict(self.ok("POST", "/clustertemplates", 201, json=body))

    def cluster(self, **body: Any) -> dict[str, Any]:
        uid = self.ok("POST", "/clusters", 202, json=body)["uuid"]
        return dict(self.ok("GET", f"/clusters/{uid}"))

    def groups(self, cluster: str) -> dict[str, dict[str, Any]]:
        items = self.ok("GET", f"/clusters/{cluster}/nodegroups/detail")["nodegroups"]
        return {g["name"]: g for g in items}


def db_of(server: LiveServer) -> Database:
    db: Database = server.runtime.db
    return db


NOT_REQUESTS = frozenset({"api_tokens", "conductors"})  # rows no request writes


def row_counts(server: LiveServer) -> dict[str, int]:
    """Rows per shoal table (the 'nothing stored' check); not counted: the API tokens
    the tests themselves issue (each `Api` makes one) and the server's own processes'
    records (`conductors`: its conductor's heartbeat row, written when it starts, which
    a loaded machine may delay past the first count)."""
    db = db_of(server)
    with db.read() as s:
        return {
            t.name: int(s.scalar(select(func.count()).select_from(t)) or 0)
            for t in Base.metadata.sorted_tables
            if t.name not in NOT_REQUESTS
        }


def seed_nodes(server: LiveServer, group_uuid: str, n: int) -> list[dict[str, Any]]:
    """`n` ACTIVE node rows in a group, as the conductor writes them."""
    db = db_of(server)
    out = []
    with db.write() as s:
        g = s.scalars(select(NodeGroupRow).where(NodeGroupRow.uuid == group_uuid)).one()
        base = int(s.scalar(select(func.count()).select_from(NodeRow)) or 0)
        for i in range(n):
            node = {
                "uuid": str(uuid.uuid4()),
                "name": f"{g.name}-n{i}",
                "address": f"10.0.{(base + i) // 250}.{(base + i) % 250 + 2}",
                "provider_id": f"srv-{uuid.uuid4().hex[:10]}",
            }
            s.add(
                NodeRow(
                    **node,
                    cluster_uuid=g.cluster_uuid,
                    nodegroup_uuid=g.uuid,
                    project_id=g.project_id,
                    state="ACTIVE",
                    created_at=utcnow(),
                    ready_at=utcnow(),
                )
            )
            s.flush()
            out.append(node)
    return out


def marked(server: LiveServer, group_uuid: str) -> set[str]:
    with db_of(server).read() as s:
        return set(
            s.scalars(
                select(NodeRow.uuid).where(NodeRow.nodegroup_uuid == group_uuid, NodeRow.to_delete)
            )
        )
