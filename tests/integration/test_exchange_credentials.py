"""A cluster's delegated credential (its Keystone trust, sealed) moves with the
cluster through `shoal export` / `shoal import`, and an import whose trust was
sealed with another secret key is refused, writing nothing. The whole round trip of
machines is tests/e2e/test_export_import.py."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select

from shoal.db import credentials, exchange, migrations
from shoal.db.engine import Database
from shoal.db.tables import ClusterCARow, ClusterCredentialRow, ClusterRow
from shoal.db.types import utcnow
from shoal.domain.errors import Conflict
from shoal.domain.sealing import Sealer, new_secret


def deployment(path: Path) -> Database:
    db = Database(f"sqlite:///{path}")
    migrations.upgrade(db)
    return db


def with_trusted_cluster(db: Database, sealer: Sealer) -> tuple[str, str]:
    """A cluster with a trust, as a create in Keystone mode writes it: (uuid, trust)."""
    cluster, trust = str(uuid.uuid4()), uuid.uuid4().hex
    credential = {"kind": "keystone-trust", "trust_id": trust, "project_id": "p"}
    with db.write() as s:
        s.add(ClusterRow(uuid=cluster, project_id="p", user_id="u", name="c", attrs={}))
        s.flush()
        credentials.insert(
            s, cluster, "keystone-trust", sealer.seal(json.dumps(credential)), utcnow()
        )
    return cluster, trust


def test_a_clusters_trust_moves_with_it_and_still_opens_with_the_key(tmp_path: Path) -> None:
    sealer = Sealer(new_secret())
    source, target = deployment(tmp_path / "a.db"), deployment(tmp_path / "b.db")
    cluster, trust = with_trusted_cluster(source, sealer)

    doc = json.loads(json.dumps(exchange.export_document(source, sealer.key_id)))  # as a file
    assert [r["cluster_uuid"] for r in doc["tables"]["cluster_credentials"]] == [cluster]
    assert trust not in json.dumps(doc)  # sealed in the file too

    report = exchange.import_document(target, doc, sealer.key_id)
    assert report.rows["cluster_credentials"] == 1
    found = credentials.sealed_of(target, cluster)
    assert found is not None and found[0] == "keystone-trust"
    assert json.loads(sealer.open(found[1]))["trust_id"] == trust


def test_a_trust_sealed_with_another_key_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    theirs, ours = Sealer(new_secret()), Sealer(new_secret())
    source, target = deployment(tmp_path / "a.db"), deployment(tmp_path / "b.db")
    with_trusted_cluster(source, theirs)
    with source.read() as s:  # only the trust is sealed: no CA made yet
        assert s.scalar(select(func.count()).select_from(ClusterCARow)) == 0
    doc = exchange.export_document(source, theirs.key_id)

    with pytest.raises(Conflict, match="sealed with secret key"):
        exchange.import_document(target, doc, ours.key_id)
    with target.read() as s:
        assert s.scalar(select(func.count()).select_from(ClusterRow)) == 0
        assert s.scalar(select(func.count()).select_from(ClusterCredentialRow)) == 0
