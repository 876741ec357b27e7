"""Request plumbing shared by the routes: caller, JSON body, paging, links."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from fastapi import Depends, Request, Response

from shoal import keys
from shoal.api import ports
from shoal.api.errors import HTTPError
from shoal.db.engine import Database
from shoal.db.repo.paging import Page
from shoal.domain import policy, sealing, validation
from shoal.domain.errors import Invalid, SecretUnavailable
from shoal.domain.model import ProviderNames
from shoal.services.context import Caller
from shoal.settings import SettingsError

PAGE_PARAMS = ("limit", "marker", "sort_key", "sort_dir")
log = logging.getLogger("shoal.api")


def runtime(request: Request) -> ports.Runtime:
    """The process's `shoal.runtime.Runtime`, through its port (the API never touches
    drivers)."""
    rt: ports.Runtime = request.app.state.runtime
    return rt


def db(request: Request) -> Database:
    d: Database = runtime(request).db
    return d


def provider_names(request: Request) -> ProviderNames:
    """The providers the deployment names, and its default (from the settings)."""
    settings = runtime(request).settings
    return ProviderNames(tuple(p.name for p in settings.providers), settings.default_provider)


_SEALER_LOCK = threading.Lock()


def sealer(request: Request) -> sealing.Sealer:
    """The key that seals secrets at rest (cluster CA keys): the one the app was made
    with, else the one the settings name, loaded (or made) on first use."""
    state = request.app.state
    with _SEALER_LOCK:
        if state.sealer is None:
            try:
                state.sealer = keys.load(runtime(request).settings)
            except SettingsError as exc:  # the operator's to fix: 503 saying what
                raise SecretUnavailable(str(exc)) from None
        s: sealing.Sealer = state.sealer
    return s


def caller(request: Request) -> Caller:
    """Who makes the request, as the deployment's authentication mode says (401 when
    it says nobody), with the request's microversion, the operator's node limits, and
    `all_tenants` (lists over every project: admins only, policy says). Once per request."""
    known: Caller | None = getattr(request.state, "caller", None)
    if known is not None:
        return known
    rt = runtime(request)
    principal = rt.auth.authenticate(request.headers)
    settings = rt.settings
    limits = validation.Limits(
        nodes_per_group=settings.max_nodes_per_group,
        nodes_per_cluster=settings.max_nodes_per_cluster,
    )
    everyone = request.query_params.get("all_tenants", "").lower() in ("1", "true")
    found = Caller(
        project_id=principal.project_id,
        user_id=principal.user_id,
        roles=principal.roles,
        all_projects=everyone,
        keystone_roles=principal.keystone_roles,
        version=request.state.version,
        limits=limits,
    )
    request.state.caller = found
    return found


@contextlib.contextmanager
def delegation(request: Request, who: Caller) -> Iterator[tuple[str, str] | None]:
    """For a cluster create: with Keystone authentication, a trust from the caller to
    shoal's service user (the cluster's servers are made in the caller's project), as
    (kind, sealed JSON) for the service to store with the cluster; removed again when
    the request fails. None in the other modes (or with trusts off), and for a caller
    the policy refuses (the service says why)."""
    auth = runtime(request).auth
    made = auth.delegate(request.headers, who) if policy.allowed(who, "cluster:create") else None
    if made is None:
        yield None
        return
    try:
        yield str(made["kind"]), sealer(request).seal(json.dumps(made))
    except BaseException:
        try:
            auth.undelegate(made)
        except Exception:  # the trust outlives a failed request; say so, keep the cause
            log.warning("could not remove trust %s of a refused create", made.get("trust_id"))
        raise


def authenticated(request: Request) -> None:
    """Router-level dependency: every route behind it needs a principal (401 otherwise)."""
    caller(request)


def require(rule: str) -> Any:
    """Router-level dependency: the principal must be allowed `rule` (routes with no
    service behind them, such as the sim's admin API)."""

    def check(request: Request) -> None:
        policy.enforce(caller(request), rule)

    return Depends(check)


def need(request: Request, major: int, minor: int, what: str) -> None:
    """406 below the microversion that introduced `what` (Magnum's behaviour)."""
    if request.state.version < (major, minor):
        raise HTTPError(406, f"{what} needs API microversion {major}.{minor} or later")


async def json_body(request: Request, *, kind: type = dict) -> Any:
    """The body as JSON: 415 for another content type, 400 when malformed, nested
    beyond the parser's recursion limit, holding what no backend stores (NaN, NUL,
    unpaired surrogates: `validation.json_problem`), or the wrong shape."""
    raw = await request.body()
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not raw.strip():
        if kind is dict:
            raise HTTPError(400, "The request body is empty; send a JSON object")
        raise HTTPError(400, "The request body is empty; send a JSON-patch list")
    if ctype and not (ctype == "application/json" or ctype.endswith("+json")):
        raise HTTPError(415, f"Unsupported Content-Type {ctype!r}: send application/json")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPError(400, f"Malformed JSON in request body: {exc}") from exc
    except RecursionError as exc:
        raise HTTPError(400, "The request body is nested too deeply") from exc
    problem = validation.json_problem(data)
    if problem:
        raise HTTPError(400, f"Unacceptable JSON in request body: {problem}")
    if not isinstance(data, kind):
        shape = "a JSON object" if kind is dict else "a JSON list"
        raise HTTPError(400, f"The request body must be {shape}")
    return data


async def json_object(request: Request) -> dict[str, Any]:
    """Dependency: the body as a JSON object."""
    data: dict[str, Any] = await json_body(request, kind=dict)
    return data


async def json_patch(request: Request) -> list[Any]:
    """Dependency: the body as a JSON-patch list."""
    data: list[Any] = await json_body(request, kind=list)
    return data


def page(request: Request) -> Page:
    """limit (default and cap: settings.page_limit), marker, sort_key, sort_dir."""
    q = request.query_params
    cap = runtime(request).settings.page_limit
    limit = cap
    if q.get("limit") is not None:
        try:
            limit = int(q["limit"])
        except ValueError as exc:
            raise Invalid(f"limit must be an integer (got {q['limit']!r})", "limit") from exc
        if limit <= 0:
            raise Invalid("Limit must be positive", "limit")
    return Page(
        limit=min(limit, cap),
        marker=q.get("marker") or None,
        sort_key=q.get("sort_key") or "id",
        sort_dir=q.get("sort_dir") or "asc",
    )


def base_url(request: Request) -> str:
    public: str | None = runtime(request).settings.public_url
    if public:
        return public.rstrip("/")
    return str(request.base_url).rstrip("/")


def links(request: Request, path: str) -> list[dict[str, str]]:
    """Magnum's self (under /v1) and bookmark links for one object."""
    base = base_url(request)
    return [
        {"href": f"{base}/v1/{path}", "rel": "self"},
        {"href": f"{base}/{path}", "rel": "bookmark"},
    ]


def collection(
    request: Request, name: str, items: list[dict[str, Any]], pg: Page, path: str | None = None
) -> dict[str, Any]:
    """`{name: items}` plus `next` when the page is full."""
    out: dict[str, Any] = {name: items}
    if items and len(items) >= pg.limit:
        query = urlencode(
            [
                ("sort_key", pg.sort_key),
                ("sort_dir", pg.sort_dir),
                ("limit", str(pg.limit)),
                ("marker", items[-1]["uuid"]),
                *((k, v) for k, v in request.query_params.multi_items() if k not in PAGE_PARAMS),
            ]
        )
        out["next"] = f"{base_url(request)}/v1/{quote(path or name)}?{query}"
    return out


def json_response(obj: Any, status_code: int = 200) -> Response:
    """A JSON body already made of JSON types, encoded once.

    Returning a dict from a route makes FastAPI walk it with jsonable_encoder
    first, which costs more than the query for big objects (56 ms for a page of
    1,000 nodes); the hot read routes return this instead.
    """
    return Response(encode_json(obj), status_code=status_code, media_type="application/json")


def encode_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON: orjson (several times faster than the standard library on a
    page of 1,000 nodes), the standard library for what orjson refuses (an integer
    beyond 64 bits, a key that is not a string); the same JSON either way."""
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
