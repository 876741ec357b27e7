"""schemathesis over every operation of the real server's /openapi.json.

The real HTTP server on 127.0.0.1 (SQLite, no conductor) is fuzzed with
requests generated from its own OpenAPI document, valid ones and invalid ones
(schemathesis' positive and negative modes), twice per operation: once with
every part generated, once with the path naming resources that exist (so
that bodies reach the services instead of stopping at a 404). Every answer
must be no 5xx and conform to the document: a declared status code, the
declared content type, and a body that matches the declared schema (Magnum's
error shape for every error).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis import checks as sc
from schemathesis.core.failures import FailureGroup

from shoal.settings import Settings
from tests.support.server import LiveServer, live_server

pytestmark = pytest.mark.xdist_group("openapi-fuzz")

EXAMPLES = 40  # per operation and per kind of run: ~4,000 requests, ~30 s here
CHECKS = [
    sc.not_a_server_error,
    sc.status_code_conformance,
    sc.content_type_conformance,
    sc.response_headers_conformance,
    sc.response_schema_conformance,
]
LATEST = {"OpenStack-API-Version": "container-infra latest"}
# Path parameters that name the seeded resources, by path prefix and name.
SEEDED = [
    ("/v1/clusters/{cluster}/nodegroups", {"cluster": "seed", "ident": "default-worker"}),
    ("/v1/clusters", {"ident": "seed"}),
    ("/v1/clustertemplates", {"ident": "seed-ct"}),
    ("/v1/nodegrouptemplates", {"ident": "seed-ngt"}),
    ("/v1/certificates", {"cluster_ident": "seed"}),
    ("/v1/credentials", {"cluster_ident": "seed"}),
    ("/v1/quotas", {"project_id": "default", "resource": "Cluster"}),
    ("/v1/sim", {"project_id": "default", "fault_id": "1"}),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("fuzz")
    settings = Settings.from_env(env={}, data_dir=data, port=0, conductor=False)
    with live_server(settings) as srv:
        headers = {**LATEST, "X-Auth-Token": srv.token("default", "admin")}
        api = httpx.Client(base_url=srv.v1, headers=headers, timeout=30)
        image = {"image_id": "fedora-coreos-40"}
        ct = {"name": "seed-ct", "coe": "kubernetes", **image}
        api.post("/clustertemplates", json=ct).raise_for_status()
        api.post("/nodegrouptemplates", json={"name": "seed-ngt"}).raise_for_status()
        api.post("/clusters", json={"name": "seed", **image}).raise_for_status()
        api.post("/sim/faults", json={"kind": "transient", "count": 0}).raise_for_status()
        yield srv


@pytest.fixture(scope="module")
def token(server: LiveServer) -> dict[str, str]:
    """An admin's token: every operation is reachable (and may still refuse a request)."""
    return {"X-Auth-Token": server.token("default", "admin")}


def _seeded(path: str) -> dict[str, str] | None:
    for prefix, params in SEEDED:
        if path.startswith(prefix):
            names = {p.strip("{}") for p in path.split("/") if p.startswith("{")}
            if names <= set(params):
                return {k: params[k] for k in names}
    return None


def test_no_5xx_and_no_schema_violation_on_any_operation(
    server: LiveServer, token: dict[str, str]
) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    failures: dict[str, str] = {}
    statuses: collections.Counter[tuple[str, int]] = collections.Counter()
    operations = 0
    started = time.monotonic()
    for result in schema.get_all_operations():
        op = result.ok()
        operations += 1
        label = f"{op.method.upper()} {op.path}"
        free = op.as_strategy(GenerationMode.POSITIVE) | op.as_strategy(GenerationMode.NEGATIVE)
        runs: list[st.SearchStrategy[Any]] = [free]
        params = _seeded(op.path)
        if params is not None and op.method.lower() != "delete":
            # Deleting the seeded resources would leave every later example a 404.
            runs.append(
                op.as_strategy(GenerationMode.POSITIVE, path_parameters=params, headers=LATEST)
                | op.as_strategy(GenerationMode.NEGATIVE, path_parameters=params)
            )
        for strategy in runs:
            _fuzz(server, token, strategy, label, failures, statuses)
    elapsed = time.monotonic() - started
    total = sum(statuses.values())
    print(f"schemathesis: {operations} operations, {total} requests, {elapsed:.1f} s, "
          f"{len(failures)} findings; statuses {sorted(statuses.items())}")  # fmt: skip
    assert not failures, "\n\n".join(f"{k}\n{v}" for k, v in failures.items())
    assert operations == _operation_count(server)
    assert all(s < 500 for _, s in statuses)
    # The seeded runs reach the services: every kind of success is among the answers.
    assert {("GET", 200), ("POST", 201), ("POST", 202), ("PATCH", 202)} <= set(statuses)


def _fuzz(
    server: LiveServer,
    token: dict[str, str],
    strategy: st.SearchStrategy[Any],
    label: str,
    failures: dict[str, str],
    statuses: collections.Counter[tuple[str, int]],
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=server.url, timeout=30, headers=token)
        statuses[(case.method.upper(), response.status_code)] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as exc:
            failures.setdefault(f"{label}: {exc.exceptions[0]!s}"[:300], str(exc)[:3000])

    run()


def _operation_count(server: LiveServer) -> int:
    doc = httpx.get(f"{server.url}/openapi.json").json()
    methods = {"get", "put", "post", "delete", "patch"}
    return sum(1 for item in doc["paths"].values() for m in item if m in methods)
