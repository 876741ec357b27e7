"""Every user data shoal renders validates against cloud-init's own JSON schema (the
one `cloud-init schema` uses, from Debian's cloud-init package)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from shoal.domain import bootstrap, pki, sealing
from shoal.domain.bootstrap import certs, kubernetes, versions
from tests.support.cloud_init_schema import validator

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def schema() -> Any:
    return validator()


def errors(schema: Any, text: str) -> list[str]:
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    return [f"{list(e.path)}: {e.message}" for e in schema.iter_errors(doc)]


@functools.cache
def rendered() -> dict[str, str]:
    ca = pki.new_ca("c-1", NOW)
    secrets = kubernetes.ClusterSecrets(
        ca, certs.new_service_account_key(), sealing.Sealer("k" * 40).bootstrap_token("c-1")
    )
    plan = kubernetes.ClusterPlan(
        "c-1", "203.0.113.5", tuple(kubernetes.Master(f"m{i}", f"10.0.0.{i + 1}") for i in range(3))
    )
    version = versions.resolve(None)

    def one(name: str, role: str, address: str | None) -> str:
        who = bootstrap.NodeIdentity(f"u-{name}", name, "c-1", "g-1", "p-1", role)
        node = kubernetes.KubeNode(who, 1, address, labels={"gpu": "yes"})
        return bootstrap.render(
            node, plan, secrets, version, shoal_url="https://s:9511", agent_token="t", now=NOW
        )

    who = bootstrap.NodeIdentity("u-1", "n-1", "c-1", "g-1", "p-1", "worker")
    return {
        "agent only": bootstrap.user_data(who, "https://s:9511", "t"),
        "first master": one("m0", "master", "10.0.0.1"),
        "other master": one("m2", "master", "10.0.0.3"),
        "worker": one("w0", "worker", None),
    }


@pytest.mark.parametrize("kind", ["agent only", "first master", "other master", "worker"])
def test_rendered_user_data_is_valid_cloud_config(schema: Any, kind: str) -> None:
    assert errors(schema, rendered()[kind]) == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d: d["write_files"][0].pop("path"), "'path' is a required property"),
        (lambda d: d.update(runcmd="reboot"), "is not of type 'array'"),
        (lambda d: d["write_files"][0].update(permissions=600), "is not of type 'string'"),
    ],
)
def test_the_schema_catches_what_cloud_init_would_refuse(
    schema: Any, change: Any, where: str
) -> None:
    doc = yaml.safe_load(rendered()["agent only"])
    change(doc)
    found = [e.message for e in schema.iter_errors(doc)]
    assert any(where in m for m in found), found
