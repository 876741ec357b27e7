"""A Kubernetes API server that behaves, in memory, for the conductor's tests: Nodes
(list, JSON merge patch with resourceVersion checks, delete), pods (list by
`spec.nodeName`, evictions that delete them), and a switch that makes it
unreachable. Served as an httpx transport (`transport()`), the seam `KubeAccess`
takes; the real API server is the e2e tests' (tests/e2e/test_kubernetes_feedback.py)."""

from __future__ import annotations

import copy
import json
import threading
from datetime import UTC, datetime
from typing import Any

import httpx


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict):
            target[k] = _merge(dict(target.get(k) or {}), v)
        else:
            target[k] = v
    return target


class FakeKube:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}  # "ns/name" -> pod
        self.reachable = True
        self.calls: list[str] = []  # "METHOD path", in order
        self._version = 0
        self._lock = threading.Lock()

    def _rv(self) -> str:
        self._version += 1
        return str(self._version)

    # -- what kubelets and controllers would do -----------------------------------------

    def register(self, name: str, ready: str = "True", since: datetime | None = None) -> None:
        with self._lock:
            self.nodes[name] = {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                             "resourceVersion": self._rv()},
                "spec": {},
                "status": {"conditions": [{
                    "type": "Ready", "status": ready, "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastTransitionTime": (since or datetime.now(UTC)).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"),
                }]},
            }  # fmt: skip

    def set_ready(self, name: str, status: str, reason: str, message: str) -> None:
        with self._lock:
            cond = self.nodes[name]["status"]["conditions"][0]
            cond.update(status=status, reason=reason, message=message,
                        lastTransitionTime=_stamp(datetime.now(UTC)))  # fmt: skip

    def add_pod(self, ns: str, name: str, node: str, owner: str = "ReplicaSet") -> None:
        with self._lock:
            self.pods[f"{ns}/{name}"] = {
                "metadata": {"namespace": ns, "name": name,
                             "ownerReferences": [{"kind": owner, "controller": True}]},
                "spec": {"nodeName": node},
                "status": {"phase": "Running"},
            }  # fmt: skip

    # -- the API ----------------------------------------------------------------------------

    def transport(self, server: str) -> httpx.BaseTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if not self.reachable:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        path = request.url.path
        with self._lock:
            self.calls.append(f"{request.method} {path}")
            return self._route(request, path)

    def _route(self, request: httpx.Request, path: str) -> httpx.Response:
        parts = path.strip("/").split("/")
        if path == "/api/v1/nodes" and request.method == "GET":
            return _ok({"items": list(copy.deepcopy(list(self.nodes.values()))),
                        "metadata": {}})  # fmt: skip
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            node = self.nodes.get(parts[3])
            if node is None:
                return _status(404, f'nodes "{parts[3]}" not found')
            if request.method == "DELETE":
                del self.nodes[parts[3]]
                return _ok({"kind": "Status", "status": "Success"})
            if request.method == "PATCH":
                assert request.headers["content-type"] == "application/merge-patch+json"
                patch = json.loads(request.content)
                want = (patch.get("metadata") or {}).get("resourceVersion")
                if want is not None and want != node["metadata"]["resourceVersion"]:
                    return _status(409, "the object has been modified")
                _merge(node, patch)
                node["metadata"]["resourceVersion"] = self._rv()
                return _ok(node)
        if path == "/api/v1/pods" and request.method == "GET":
            selector = request.url.params.get("fieldSelector", "")
            on = selector.removeprefix("spec.nodeName=")
            items = [p for p in self.pods.values() if p["spec"]["nodeName"] == on]
            return _ok({"items": copy.deepcopy(items), "metadata": {}})
        if len(parts) == 7 and parts[6] == "eviction" and request.method == "POST":
            key = f"{parts[3]}/{parts[5]}"
            if self.pods.pop(key, None) is None:
                return _status(404, f'pods "{parts[5]}" not found')
            return _ok({"kind": "Status", "status": "Success"}, 201)
        return _status(404, f"no route {request.method} {path}")


def _ok(body: dict[str, Any], code: int = 200) -> httpx.Response:
    return httpx.Response(code, json=body)


def _status(code: int, message: str) -> httpx.Response:
    return httpx.Response(code, json={"kind": "Status", "code": code, "message": message})


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
