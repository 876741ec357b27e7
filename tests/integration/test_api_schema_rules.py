"""The OpenAPI document's request rules are the server's (issue 22, point 7): a body
the document refuses gets 400 in Magnum's error shape naming the field, and stores
nothing; the bodies clients send today, which the document accepts, still work.

Each case is checked twice, against the real server on 127.0.0.1 and against the
schema the server publishes at /openapi.json, so neither can drift from the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest

from tests.integration.api_support import Api, api_server, row_counts
from tests.support.server import LiveServer

CSR_NONE = "-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n"

# (schema, method, path, body, field the 400 names); "{c}" is a cluster of the project.
# fmt: off
REFUSED: list[tuple[str, str, str, Any, str]] = [
    ("TokenCreate", "POST", "/tokens", {"project_id": ""}, "project_id"),
    ("TokenCreate", "POST", "/tokens", {"project_id": "   "}, "project_id"),
    ("TokenCreate", "POST", "/tokens", {"project_id": "team-a", "user_id": ""}, "user_id"),
    ("TokenCreate", "POST", "/tokens", {"project_id": "team-a", "user_id": " "}, "user_id"),
    ("OrphanAdopt", "POST", "/orphans/adopt", {"cluster_id": ""}, "cluster_id"),
    ("OrphanAdopt", "POST", "/orphans/adopt", {"cluster_id": " \t"}, "cluster_id"),
    ("OrphanAdopt", "POST", "/orphans/adopt", {"name": "prod"}, "cluster_id"),
    ("OrphanAdopt", "POST", "/orphans/adopt", {"cluster_id": "x", "name": " "}, "name"),
    ("QuotaCreate", "POST", "/quotas", {"project_id": "a", "resource": "Volume", "hard_limit": 1}, "resource"),  # noqa: E501
    ("QuotaCreate", "POST", "/quotas", {"project_id": "  ", "resource": "Cluster", "hard_limit": 1}, "project_id"),  # noqa: E501
    ("QuotaCreate", "POST", "/quotas", {"project_id": "a", "resource": "Cluster"}, "hard_limit"),
    ("QuotaCreate", "POST", "/quotas", {"project_id": "a", "hard_limit": -1}, "hard_limit"),
    ("QuotaUpdate", "PATCH", "/quotas/a/Cluster", {}, "hard_limit"),
    ("QuotaUpdate", "PATCH", "/quotas/a/Cluster", {"hard_limit": 2**31}, "hard_limit"),
    ("Upgrade", "POST", "/clusters/{c}/actions/upgrade", {"cluster_template": ""}, "cluster_template"),  # noqa: E501
    ("Upgrade", "POST", "/clusters/{c}/actions/upgrade", {"cluster_template": "  "}, "cluster_template"),  # noqa: E501
    ("CertificateSign", "POST", "/certificates", {"csr": CSR_NONE}, "cluster_uuid"),
    ("CertificateSign", "POST", "/certificates", {"cluster_uuid": "", "csr": CSR_NONE}, "cluster_uuid"),  # noqa: E501
    ("OperationCreate", "POST", "/clusters/{c}/operations", {"kind": "reboot", "params": {"force": True}}, "params"),  # noqa: E501
    ("OperationCreate", "POST", "/clusters/{c}/operations", {"kind": "rebase", "params": {"ref": ""}}, "params.ref"),  # noqa: E501
    ("OperationCreate", "POST", "/clusters/{c}/operations", {"kind": "upgrade-packages", "params": {"packages": [""]}}, "params.packages"),  # noqa: E501
    ("OperationCreate", "POST", "/clusters/{c}/operations", {"kind": "reboot", "params": []}, "params"),  # noqa: E501
    ("AgentReport", "POST", "/agent/tasks/x", {"state": "FAILED", "exit_code": 2**31}, "exit_code"),  # noqa: E501
]

# What clients send today (canonical JSON): the document and the server accept them.
ACCEPTED: list[tuple[str, str, str, Any, int]] = [
    ("TokenCreate", "POST", "/tokens", {"project_id": "team-a", "role": "reader"}, 201),
    ("TokenCreate", "POST", "/tokens", {"project_id": "team-a", "user_id": "ci", "expires": "1d"}, 201),  # noqa: E501
    ("QuotaCreate", "POST", "/quotas", {"project_id": "team-a", "resource": "Cluster", "hard_limit": 3}, 201),  # noqa: E501
    ("QuotaCreate", "POST", "/quotas", {"project_id": "3f2a9c", "hard_limit": 0}, 201),
    ("QuotaUpdate", "PATCH", "/quotas/team-a/Cluster", {"hard_limit": 5}, 202),
]
# fmt: on


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with api_server("sqlite", tmp_path_factory.mktemp("schema-rules")) as srv:
        yield srv


@pytest.fixture(scope="module")
def admin(server: LiveServer) -> Api:
    return Api(server, role="admin")


@pytest.fixture(scope="module")
def cluster(admin: Api) -> str:
    return str(admin.cluster(name="rules", image_id="fedora-coreos-40")["uuid"])


@pytest.fixture(scope="module")
def document(server: LiveServer) -> dict[str, Any]:
    doc: dict[str, Any] = httpx.get(f"{server.url}/openapi.json").json()
    return doc


def _schema_errors(document: dict[str, Any], name: str, body: Any) -> list[str]:
    schema = document["components"]["schemas"][name]
    validator = jsonschema.Draft202012Validator(schema)
    return [e.message for e in validator.iter_errors(body)]


def _tokens(admin: Api) -> int:
    return len(admin.ok("GET", "/tokens")["tokens"])


@pytest.mark.parametrize(("name", "method", "path", "body", "field"), REFUSED)
def test_a_body_the_document_refuses_gets_a_400_naming_the_field_and_stores_nothing(
    server: LiveServer,
    admin: Api,
    cluster: str,
    document: dict[str, Any],
    name: str,
    method: str,
    path: str,
    body: Any,
    field: str,
) -> None:
    assert _schema_errors(document, name, body), f"the document accepts {body}"
    before, tokens = row_counts(server), _tokens(admin)
    r = admin.request(method, path.format(c=cluster), json=body)
    assert r.status_code == 400, r.text
    error = r.json()["errors"][0]
    assert error["status"] == 400
    assert error["title"]
    assert field in error["detail"], error["detail"]
    assert row_counts(server) == before
    assert _tokens(admin) == tokens


@pytest.mark.parametrize(("name", "method", "path", "body", "status"), ACCEPTED)
def test_what_clients_send_today_is_accepted_by_the_document_and_the_server(
    admin: Api,
    document: dict[str, Any],
    name: str,
    method: str,
    path: str,
    body: Any,
    status: int,
) -> None:
    assert not _schema_errors(document, name, body)
    admin.ok(method, path, status, json=body)


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_a_quota_path_naming_another_resource_is_a_400_and_the_document_says_so(
    server: LiveServer, admin: Api, document: dict[str, Any], method: str
) -> None:
    admin.ok("POST", "/quotas", 201, json={"project_id": "team-b", "hard_limit": 4})
    before = row_counts(server)
    r = admin.request(method, "/quotas/team-b/Volume", json={"hard_limit": 1})
    assert r.status_code == 400, r.text
    assert r.json()["errors"][0]["status"] == 400
    assert "resource" in r.json()["errors"][0]["detail"]
    assert row_counts(server) == before
    assert admin.ok("GET", "/quotas/team-b/Cluster")["hard_limit"] == 4
    op = document["paths"]["/v1/quotas/{project_id}/{resource}"][method.lower()]
    (param,) = [p for p in op["parameters"] if p["name"] == "resource"]
    assert param["schema"].get("enum", [param["schema"].get("const")]) == ["Cluster"]


def test_a_blank_quota_project_in_the_path_is_a_400(server: LiveServer, admin: Api) -> None:
    before = row_counts(server)
    r = admin.request("PATCH", "/quotas/%20/Cluster", json={"hard_limit": 1})
    assert r.status_code == 400, r.text
    assert "project_id" in r.json()["errors"][0]["detail"]
    assert row_counts(server) == before
