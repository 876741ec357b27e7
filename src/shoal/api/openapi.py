"""The OpenAPI document as the API really answers.

FastAPI declares a 422 with its own validation schema on every operation that
takes input; shoal answers bad input with 400 in Magnum's error shape
(errors.py). This rewrites those declarations, once, when the document is
first asked for."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

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


def install(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes,
            )  # fmt: skip
            app.openapi_schema = rewrite(doc)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def rewrite(doc: dict[str, Any]) -> dict[str, Any]:
    """Every declared 422 becomes a 400 in Magnum's error shape."""
    for item in doc.get("paths", {}).values():
        for op in item.values():
            responses = op.get("responses") if isinstance(op, dict) else None
            if not responses or "422" not in responses:
                continue
            del responses["422"]
            responses["400"] = {
                "description": "Bad request: the error names the field and the rule",
                "content": {"application/json": {"schema": _ERROR_REF}},
            }
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in _FASTAPI_ONLY:
        schemas.pop(name, None)
    schemas[ERROR_SCHEMA] = _SCHEMA
    return doc
