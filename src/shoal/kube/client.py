"""The Kubernetes API calls the conductor makes, over httpx with mutual TLS (the
cluster's CA pinned; a client certificate the conductor issues from that CA).

Every call has a bounded timeout; whatever goes wrong is a `KubeError` (an
`Unreachable` one when no HTTP answer came), never httpx's own exceptions."""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

import httpx

JSON_MERGE = "application/merge-patch+json"
LIST_LIMIT = 5000  # objects per page of a list


class KubeError(Exception):
    """A call to the API server failed; `reason` says how, for a person."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class Unreachable(KubeError):
    """No answer from the API server (refused, timed out, TLS failed)."""


def ssl_context(ca_pem: str, cert_pem: str, key_pem: str) -> ssl.SSLContext:
    """Trust only the cluster's CA; present the client certificate. The key goes
    through a private temporary file (the ssl module loads keys from files only),
    removed at once."""
    ctx = ssl.create_default_context(cadata=ca_pem)
    fd, path = tempfile.mkstemp(prefix="shoal-kube-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(cert_pem + key_pem)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)
    return ctx


class Client:
    """One cluster's API server at `server` (`https://host:port`)."""

    def __init__(
        self,
        server: str,
        ca_pem: str,
        cert_pem: str,
        key_pem: str,
        *,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.server = server
        verify: ssl.SSLContext | bool = (
            ssl_context(ca_pem, cert_pem, key_pem) if transport is None else True
        )
        self._http = httpx.Client(
            base_url=server,
            verify=verify,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 3.0)),
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "shoal-conductor"},
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            r = self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise Unreachable(said) from exc
        if r.status_code >= 400:
            try:
                said = r.json().get("message") or r.text
            except ValueError:
                said = r.text
            raise KubeError(f"{method} {path}: {r.status_code} {str(said)[:300]}", r.status_code)
        return r

    def _list(self, path: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        query = {**(params or {}), "limit": str(LIST_LIMIT)}
        for _ in range(100):  # bounded: 100 pages of LIST_LIMIT
            body = self._call("GET", path, params=query).json()
            items += body.get("items") or []
            more = (body.get("metadata") or {}).get("continue")
            if not more:
                break
            query["continue"] = more
        return items

    def nodes(self) -> list[dict[str, Any]]:
        """Every Node object."""
        return self._list("/api/v1/nodes")

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to `node`, in every namespace."""
        return self._list("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of Node `name`."""
        self._call(
            "PATCH", f"/api/v1/nodes/{name}", json=patch, headers={"Content-Type": JSON_MERGE}
        )

    def delete_node(self, name: str) -> None:
        """Delete Node `name`; one already gone is done."""
        try:
            self._call("DELETE", f"/api/v1/nodes/{name}")
        except KubeError as exc:
            if exc.status != 404:
                raise

    def evict(self, namespace: str, name: str) -> bool:
        """Ask for the eviction of a pod: True when granted (or the pod is gone), False
        when a disruption budget refuses it for now (429)."""
        body = {
            "apiVersion": "policy/v1beta1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        try:
            self._call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", json=body)
        except KubeError as exc:
            if exc.status == 404:
                return True
            if exc.status == 429:
                return False
            raise
        return True
