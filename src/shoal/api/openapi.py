"""The OpenAPI document as the API really answers.

FastAPI declares a 422 with its own validation schema on every operation that
takes input; shoal answers bad input with 400 in Magnum's error shape
(errors.py). This rewrites the document, once, when it is first asked for:

- every operation declares the errors it can answer, in Magnum's shape: 400,
  404, 406, 409 and 413 everywhere (bad headers, unknown ids and names,
  microversions, conflicts, bodies past the limit), 415 where it takes a body,
  401 and 403 where a token is needed (no token or a bad one; a role the policy
  does not allow, a quota, another site's web page), 503 where a sealed secret or
  Keystone is needed, 401 on the node agents' routes;
- every operation declares the request headers shoal reads (microversion), and
  the ones behind authentication the token (security scheme `token`:
  X-Auth-Token); the identity headers (X-Project-Id, X-User-Id, X-Roles) only
  on a server with SHOAL_AUTH=none, the only one that reads them;
- request bodies are the typed schemas of `schemas.py`, built with this
  server's node limits.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from shoal.api import microversion, schemas
from shoal.domain import validation

ERROR_SCHEMA = "MagnumErrors"
_ERROR_REF = {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["errors"],
    "properties": {
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["status", "title", "detail"],
                "properties": {
                    "request_id": {"type": "string"},
                    "code": {"type": "string"},  # client, server, or a Magnum code
                    "status": {"type": "integer"},
                    "title": {"type": "string"},
                    "detail": {"type": "string"},
                    "links": {"type": "array", "items": {}},
                    "min_version": {"type": "string"},  # 406: the supported range
                    "max_version": {"type": "string"},
                },
            },
        }
    },
}
_FASTAPI_ONLY = ("HTTPValidationError", "ValidationError")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Answered by every operation: headers, identifiers and the body are checked first.
ALWAYS = {
    "400": "Bad request: the error names the field and the rule (also an unparsable "
    "OpenStack-API-Version, or under SHOAL_AUTH=none an X-Project-Id past 255 characters)",
    "404": "Not found: an identifier names nothing in the caller's project",
    "406": "The requested microversion is outside the supported range, or the "
    "operation needs a higher one (code magnum.microversion-unsupported when out of range)",
    "409": "Conflict: a name matches several objects, the resource is being deleted, "
    "a count is outside its group's range, or a concurrent change won; retry",
    "413": "The request body is larger than the server accepts (SHOAL_MAX_BODY_BYTES)",
}
WITH_BODY = {"415": "The body is not JSON: send Content-Type application/json"}
AUTHENTICATED = {
    "401": "No token, or one the server does not accept (expired, revoked, unknown)",
    "403": "The token's role may not do this (docs/api.md: who may do what), the "
    "project's cluster quota is reached, or a web page of another origin asked",
    "503": "Keystone cannot be reached to check the token (SHOAL_AUTH=keystone)",
}
# Answered to anyone: what a client reads before it has a token.
PUBLIC = frozenset({("get", "/"), ("get", "/v1")})
SECURITY_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": "X-Auth-Token",
    "description": "A token of shoal's own (SHOAL_AUTH=local: `shoal token create`) or of "
    "Keystone (SHOAL_AUTH=keystone); `Authorization: Bearer` works too",
}
SEALED = {
    "503": "The server cannot open the cluster's CA key: it was started without the "
    "secret key the key was sealed with (the operator must fix the configuration)"
}
AGENT = {"401": "The node agent's token (X-Shoal-Node-Token) is missing or is not this node's"}
# (method, path) -> extra responses beyond ALWAYS.
EXTRA: dict[tuple[str, str], dict[str, str]] = {
    ("post", "/v1/agent/heartbeat"): AGENT,
    ("post", "/v1/agent/tasks/{uuid}"): AGENT,
    ("post", "/v1/certificates"): SEALED,
    ("get", "/v1/certificates/{cluster_ident}"): SEALED,
    ("patch", "/v1/certificates/{cluster_ident}"): SEALED,
}
# Operations whose success may be an empty, non-JSON body.
OCTET_SUCCESS = {("patch", "/v1/certificates/{cluster_ident}"): "202"}
VERSIONS = [f"container-infra {microversion.fmt((1, m))}" for m in range(1, 15)]
# Operations that answer 406 below a microversion (`deps.need` in the routes, Magnum's
# gates): their document requires the header and offers only the versions they take.
# (method or "*", path prefix) -> the first minor version of 1.x that serves it.
GATES: tuple[tuple[str, str, int], ...] = (
    ("*", "/v1/clusters/{cluster}/nodegroups", 9),
    ("post", "/v1/clusters/{ident}/actions/resize", 7),
    ("post", "/v1/clusters/{ident}/actions/upgrade", 7),
    ("patch", "/v1/certificates/{cluster_ident}", 5),
)


def minimum_minor(method: str, path: str) -> int | None:
    """The first 1.x minor version `method path` serves, when it is gated."""
    for gate_method, prefix, minor in GATES:
        if gate_method in ("*", method) and path.startswith(prefix):
            return minor
    return None


def _version_header(minor: int) -> dict[str, Any]:
    header = copy.deepcopy(HEADERS[0])
    header["required"] = True
    header["description"] = (
        f"Microversion: `container-infra 1.{minor}` or later, or `container-infra latest` "
        f"(this operation answers 406 below 1.{minor}, and the default is 1.1)"
    )
    versions = [f"container-infra {microversion.fmt((1, m))}" for m in range(minor, 15)]
    header["schema"] = {"type": "string", "enum": ["container-infra latest", *versions]}
    return header


HEADERS: list[dict[str, Any]] = [
    {
        "name": microversion.HEADER,
        "in": "header",
        "required": False,
        "description": "Microversion: `container-infra X.Y` or `container-infra latest` "
        "(default 1.1). The service names container-infrastructure-management and "
        "container-infrastructure are accepted too.",
        "schema": {"type": "string", "enum": ["container-infra latest", *VERSIONS]},
    },
]
# Who the caller is, read only by a server with SHOAL_AUTH=none (auth/headers.py), and
# declared only there: any other server ignores them (the token says who asks).
IDENTITY_HEADERS: list[dict[str, Any]] = [
    {
        "name": "X-Project-Id",
        "in": "header",
        "required": False,
        "description": "The caller's project (default: the server's default project)",
        "schema": {"type": "string", "minLength": 1, "maxLength": validation.NAME_MAX},
    },
    {
        "name": "X-User-Id",
        "in": "header",
        "required": False,
        "description": "The user recorded on what the request creates (default admin)",
        "schema": {"type": "string", "minLength": 1, "maxLength": validation.NAME_MAX},
    },
    {
        "name": "X-Roles",
        "in": "header",
        "required": False,
        "description": "The caller's roles, comma-separated (default admin)",
        "schema": {"type": "string"},
    },
]


def install(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes,
            )  # fmt: skip
            settings = app.state.runtime.settings
            limits = validation.Limits(
                nodes_per_group=settings.max_nodes_per_group,
                nodes_per_cluster=settings.max_nodes_per_cluster,
            )
            app.openapi_schema = rewrite(doc, limits, identity=settings.auth == "none")
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def rewrite(
    doc: dict[str, Any], limits: validation.Limits | None = None, *, identity: bool = False
) -> dict[str, Any]:
    """FastAPI's 422s out; Magnum's error answers, shoal's headers and typed bodies in.
    `identity`: the server trusts X-Project-Id / X-User-Id / X-Roles (SHOAL_AUTH=none)."""
    for path, item in doc.get("paths", {}).items():
        for method, op in item.items():
            if method not in METHODS or not isinstance(op, dict):
                continue
            responses = op.setdefault("responses", {})
            responses.pop("422", None)
            declared = {**ALWAYS, **EXTRA.get((method, path), {})}
            if "requestBody" in op:
                declared.update(WITH_BODY)
            headers = HEADERS
            if (method, path) not in PUBLIC and not path.startswith("/v1/agent/"):
                declared = {**AUTHENTICATED, **declared}
                op["security"] = [{"token": []}]
                headers = HEADERS + IDENTITY_HEADERS if identity else HEADERS
            for status, description in declared.items():
                responses.setdefault(status, _error(description))
            success = OCTET_SUCCESS.get((method, path))
            if success is not None:
                content = responses[success].setdefault("content", {})
                content["application/octet-stream"] = {"schema": {"type": "string"}}
            params = op.setdefault("parameters", [])
            names = {p.get("name", "").lower() for p in params}
            params.extend(copy.deepcopy(h) for h in headers if h["name"].lower() not in names)
            minor = minimum_minor(method, path)
            if minor is not None:
                params[:] = [
                    _version_header(minor) if p.get("name") == microversion.HEADER else p
                    for p in params
                ]
    doc.setdefault("components", {}).setdefault("securitySchemes", {})["token"] = SECURITY_SCHEME
    components = doc["components"].setdefault("schemas", {})
    for name in _FASTAPI_ONLY:
        components.pop(name, None)
    components[ERROR_SCHEMA] = _SCHEMA
    components.update(schemas.components(limits or validation.Limits()))
    return doc
