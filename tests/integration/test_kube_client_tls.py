"""The conductor's Kubernetes client over real mutual TLS on 127.0.0.1: `KubeAccess`
issues its client certificate from the cluster's CA, pins that CA for the server's
certificate, and maps every failure (refused, TLS, a silent server, an error
answer) to `KubeError` within its timeout. The real API server is the e2e tests'
(tests/e2e/test_kubernetes_feedback.py); this runs everywhere."""

from __future__ import annotations

import json
import os
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shoal.conductor.kubeapi import KubeAccess
from shoal.db.types import utcnow
from shoal.domain import pki
from shoal.domain.bootstrap import ClusterSecrets, certs
from shoal.kube import KubeError, Unreachable
from tests.support.server import free_port

CLUSTER = "c0ffee00-0000-4000-8000-000000000001"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        peer = self.connection.getpeercert()  # type: ignore[attr-defined]
        subject = {k: v for rdn in peer["subject"] for k, v in rdn}
        if self.path.startswith("/api/v1/nodes"):
            body: dict[str, Any] = {"items": [{"metadata": {"name": subject["commonName"],
                                    "labels": {"o": subject["organizationName"]}}}]}  # fmt: skip
            code = 200
        else:
            body, code = {"kind": "Status", "message": "forbidden: not here"}, 403
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _server_context(ca: pki.CA) -> ssl.SSLContext:
    pair = certs.issue(ca, "kube-apiserver", utcnow(), usage=certs.SERVER, sans=["127.0.0.1"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    fd, path = tempfile.mkstemp(suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(pair.cert_pem + pair.key_pem)
    ctx.load_cert_chain(path)
    os.unlink(path)
    ctx.load_verify_locations(cadata=ca.cert_pem)
    ctx.verify_mode = ssl.CERT_REQUIRED  # a client certificate from the cluster CA only
    return ctx


@pytest.fixture
def api_server() -> Iterator[tuple[str, pki.CA]]:
    ca = pki.new_ca(CLUSTER, utcnow())
    httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    httpd.socket = _server_context(ca).wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", ca
    finally:
        httpd.shutdown()
        httpd.server_close()


def _access(ca: pki.CA, timeout: float = 2.0) -> KubeAccess:
    return KubeAccess(lambda _: ClusterSecrets(ca, "", ""), utcnow, timeout)


def test_the_conductor_authenticates_with_a_certificate_from_the_cluster_ca(
    api_server: tuple[str, pki.CA],
) -> None:
    server, ca = api_server
    access = _access(ca)
    client = access.client(CLUSTER, server)
    (node,) = client.nodes()
    # The server saw the conductor's identity as Kubernetes reads it (CN user, O group).
    assert node["metadata"]["name"] == "shoal-conductor"
    assert node["metadata"]["labels"]["o"] == "system:masters"
    assert access.client(CLUSTER, server) is client  # kept, not issued again
    with pytest.raises(KubeError) as err:
        client.pods_on("n")
    assert err.value.status == 403 and "forbidden: not here" in err.value.reason
    assert not isinstance(err.value, Unreachable)
    access.forget(CLUSTER)


def test_a_server_of_another_ca_is_not_trusted(api_server: tuple[str, pki.CA]) -> None:
    server, _ = api_server
    other = pki.new_ca(CLUSTER, utcnow())  # the conductor holds another CA than the server's
    with pytest.raises(Unreachable) as err:
        _access(other).client(CLUSTER, server).nodes()
    assert "CERTIFICATE_VERIFY_FAILED" in err.value.reason or "certificate" in err.value.reason


def test_refused_and_silent_servers_are_unreachable_within_the_timeout() -> None:
    ca = pki.new_ca(CLUSTER, utcnow())
    with pytest.raises(Unreachable) as err:
        _access(ca).client(CLUSTER, f"https://127.0.0.1:{free_port()}").nodes()
    assert "ConnectError" in err.value.reason
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never says a word
    try:
        started = time.monotonic()
        with pytest.raises(Unreachable) as err:
            _access(ca, timeout=0.5).client(
                CLUSTER, f"https://127.0.0.1:{silent.getsockname()[1]}"
            ).nodes()
        assert time.monotonic() - started < 5
        assert "Timeout" in err.value.reason
    finally:
        silent.close()
