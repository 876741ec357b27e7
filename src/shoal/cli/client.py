"""The HTTP client the CLI uses: one place for the URL, headers and error mapping.

Every failure ends here as one line on stderr and a non-zero exit, never a
traceback: an API error shows its HTTP status and Magnum title/detail; a server
that cannot be reached says how to start one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx
import typer

from shoal import admin_token, logs
from shoal.settings import default_data_dir

DEFAULT_URL = "http://127.0.0.1:9511"
API_VERSION = "container-infra latest"


def fail(message: str, code: int = 1) -> NoReturn:
    """Print `error: message` (any URL password masked) on stderr and exit with `code`."""
    typer.echo(f"error: {logs.redact(message)}", err=True)
    raise typer.Exit(code)


@dataclass(frozen=True)
class Connection:
    """Where the API is and who is asking: from options, else SHOAL_* variables."""

    url: str = DEFAULT_URL
    token: str | None = field(default=None, repr=False)  # never printed
    project: str | None = None
    timeout: float = 30.0

    @classmethod
    def from_env(
        cls, url: str | None = None, token: str | None = None, project: str | None = None
    ) -> Connection:
        """Options win over SHOAL_URL, SHOAL_TOKEN and SHOAL_PROJECT; with no token given,
        the file SHOAL_TOKEN_FILE names, else the admin-token file that `shoal serve`
        writes in the data directory (SHOAL_DATA_DIR) on a fresh deployment."""
        return cls(
            url=(url or os.environ.get("SHOAL_URL") or DEFAULT_URL).rstrip("/"),
            token=token or os.environ.get("SHOAL_TOKEN") or token_from_file(),
            project=project or os.environ.get("SHOAL_PROJECT") or None,
        )


def token_from_file() -> str | None:
    """The token in SHOAL_TOKEN_FILE, else in the data directory's admin-token file
    (None when neither can be read)."""
    named = os.environ.get("SHOAL_TOKEN_FILE")
    if named:
        path = Path(named)
    else:
        data = os.environ.get("SHOAL_DATA_DIR")
        path = (Path(data) if data else default_data_dir()) / admin_token.TOKEN_FILE
    try:
        return path.read_text().strip() or None
    except OSError:
        if named:
            fail(f"SHOAL_TOKEN_FILE={named} cannot be read; point it at a file holding a token")
        return None


def error_line(resp: httpx.Response) -> str:
    """`HTTP 409: <title>: <detail>` from a Magnum error body, or the raw text."""
    text = resp.text.strip()
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            title = str(errors[0].get("title") or "").strip()
            detail = str(errors[0].get("detail") or "").strip()
            if detail.rstrip(".") == title.rstrip(".") or not detail:
                text = title or detail
            elif not title:
                text = detail
            else:
                text = f"{title}: {detail}"
        elif "detail" in body:  # FastAPI-style fallback
            text = str(body["detail"])
    return f"HTTP {resp.status_code}: {text or resp.reason_phrase}"


class Client:
    """Thin JSON-over-HTTP wrapper for `/v1`; failures exit the command cleanly."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        headers = {"OpenStack-API-Version": API_VERSION, "Accept": "application/json"}
        if conn.token:
            headers["X-Auth-Token"] = conn.token
        if conn.project:
            headers["X-Project-Id"] = conn.project
        self._http = httpx.Client(base_url=conn.url + "/v1", headers=headers, timeout=conn.timeout)

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        allow_404: bool = False,
    ) -> Any:
        """Send one request; return the decoded JSON body (None for 204 or an allowed 404)."""
        try:
            resp = self._http.request(method, path, json=json, params=params)
        except httpx.ConnectError:
            fail(
                f"cannot reach shoal at {self.conn.url}: start it with `shoal serve` "
                "(or set SHOAL_URL / --url)"
            )
        except httpx.TimeoutException:
            fail(f"shoal at {self.conn.url} did not answer within {self.conn.timeout:g}s")
        except httpx.HTTPError as exc:
            fail(f"cannot talk to shoal at {self.conn.url}: {exc}")
        if allow_404 and resp.status_code == 404:
            return None
        if resp.status_code >= 400:
            fail(error_line(resp))
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            fail(f"HTTP {resp.status_code}: the answer is not JSON: {resp.text[:200]}")

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def find(self, path: str) -> Any:
        """GET that answers None on 404 (used by waits for deletions)."""
        return self.request("GET", path, allow_404=True)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def list_all(self, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
        """Every item of a collection, following `next` links page by page."""
        items: list[dict[str, Any]] = []
        page = self.get(path, **params)
        while True:
            items.extend(page.get(key, []))
            nxt = page.get("next")
            if not nxt or not page.get(key):
                return items
            marker = httpx.URL(nxt).params.get("marker")
            if not marker:
                return items
            page = self.get(path, **{**params, "marker": marker})


def connect(ctx: typer.Context) -> Client:
    """The client for this invocation, built from the global options."""
    conn = ctx.obj if isinstance(ctx.obj, Connection) else None
    if conn is None:
        root = ctx.find_root()
        conn = root.obj if isinstance(root.obj, Connection) else Connection.from_env()
    client = Client(conn)
    ctx.call_on_close(client.close)
    return client
