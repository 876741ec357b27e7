"""The REST calls the heat driver makes, over an openstacksdk connection's sessions
(openstacksdk for the clouds.yaml entry, the token and the catalog; plain REST for
the calls, so that a stack is updated with PATCH and read without resolving its
outputs). Every failure leaves here as a contract error (errors.py)."""

from __future__ import annotations

import threading
from typing import Any

import openstack
import requests
from keystoneauth1 import exceptions as ks_exceptions
from openstack import exceptions as sdk_exceptions
from openstack.config import loader
from openstack.connection import Connection

from shoal.drivers.contract import DriverError, PermanentError, TransientError
from shoal.drivers.heat import errors
from shoal.drivers.heat.settings import HeatSettings
from shoal.options import SettingsError

COMPUTE_MICROVERSION = "2.26"  # server tags, and the tags filter of a listing
IDS_KEPT = 10_000  # stack ids one process remembers by name


def load(settings: HeatSettings) -> Any:
    """The clouds.yaml entry (local files only); SettingsError when it cannot be used."""
    files = [settings.clouds_yaml] if settings.clouds_yaml else None
    try:
        config = loader.OpenStackConfig(config_files=files, load_envvars=False)
        kwargs: dict[str, Any] = {"api_timeout": settings.api_timeout}
        if settings.region_name:
            kwargs["region_name"] = settings.region_name
        return config.get_one(settings.cloud, **kwargs)
    except Exception as exc:  # openstacksdk and keystoneauth raise many kinds here
        where = settings.clouds_yaml or "openstacksdk's clouds.yaml lookup"
        raise SettingsError(f"cloud {settings.cloud!r} in {where}: {exc}") from exc


class Cloud:
    """One connection (made on first use, shared by threads) and the calls on it."""

    def __init__(self, region: Any) -> None:
        self._region = region
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}  # stack name -> its id, as last read (stack())
        self._ids_lock = threading.Lock()

    def conn(self) -> Connection:
        with self._lock:
            if self._conn is None:
                self._conn = openstack.connection.Connection(config=self._region)
            return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def call(
        self, service: str, method: str, path: str, *, ok: tuple[int, ...] = (200,), **kw: Any
    ) -> requests.Response | None:
        """`method path` on `service` (orchestration, compute, image); the response when
        its status is in `ok`, None on 404, else a contract error."""
        try:
            adapter = getattr(self.conn(), service)
            resp: requests.Response = adapter.request(path, method, raise_exc=False, **kw)
        except DriverError:
            raise
        except (ks_exceptions.ClientException, requests.RequestException) as exc:
            raise errors.classify(None, f"{type(exc).__name__}: {exc}") from exc
        except sdk_exceptions.SDKException as exc:  # no catalog entry, failed discovery
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        if resp.status_code in ok:
            return resp
        if resp.status_code == 404:
            return None
        raise errors.classify(
            resp.status_code,
            f"{service}: {errors.message_of(resp.text)}",
            errors.retry_after_of(resp.headers.get("Retry-After")),
        )

    def json(self, service: str, path: str, **kw: Any) -> Any:
        resp = self.call(service, "GET", path, **kw)
        return None if resp is None else resp.json()

    # ------------------------------------------------------------------ Heat
    def stack(self, name: str) -> dict[str, Any] | None:
        """The stack named `name` with its parameters (outputs unresolved), or None. Read
        by its id once known: by name alone, Heat's API answers with a redirect to the
        id, one more request and one more call to its engine. A stack gone by that id is
        looked up by name again (one made anew under the name is found)."""
        known = self._ids.get(name)
        if known is not None:
            stack = self._read(f"/stacks/{name}/{known}")
            if stack is not None:
                return stack
            with self._ids_lock:
                self._ids.pop(name, None)
        stack = self._read(f"/stacks/{name}")
        if stack is not None:
            with self._ids_lock:
                self._ids[name] = str(stack["id"])
                while len(self._ids) > IDS_KEPT:  # bounded: the oldest are looked up again
                    self._ids.pop(next(iter(self._ids)))
        return stack

    def _read(self, path: str) -> dict[str, Any] | None:
        found = self.json("orchestration", path, params={"resolve_outputs": False})
        if found is None:
            return None
        stack: dict[str, Any] = found["stack"]
        return None if stack.get("stack_status") == "DELETE_COMPLETE" else stack

    def stacks(self, tags: list[str]) -> list[dict[str, Any]]:
        found = self.json("orchestration", "/stacks", params={"tags": ",".join(tags)})
        return list((found or {}).get("stacks", []))

    def create_stack(self, body: dict[str, Any]) -> None:
        self.call("orchestration", "POST", "/stacks", ok=(201,), json=body)

    def patch_stack(
        self, name: str, stack_id: str, parameters: dict[str, Any], files: dict[str, str]
    ) -> None:
        """An update that keeps the stack's template and environment (`existing`), with
        new parameters and files (merged into the stack's own)."""
        body = {"parameters": parameters, "files": files}
        path = f"/stacks/{name}/{stack_id}"
        if self.call("orchestration", "PATCH", path, ok=(202,), json=body) is None:
            raise TransientError(f"the stack {name} went away during its update; retrying")

    def delete_stack(self, name: str, stack_id: str) -> None:
        self.call("orchestration", "DELETE", f"/stacks/{name}/{stack_id}", ok=(204,))

    def output(self, name: str, stack_id: str, key: str) -> Any:
        """One output of a stack, resolved alone (`outputs/{key}`)."""
        found = self.json("orchestration", f"/stacks/{name}/{stack_id}/outputs/{key}")
        return None if found is None else found.get("output", {}).get("output_value")

    # ------------------------------------------------------------------ Nova, Glance
    def servers(self, tags: list[str]) -> list[dict[str, Any]]:
        found = self.json(
            "compute",
            "/servers/detail",
            params={"tags": ",".join(tags)},
            microversion=COMPUTE_MICROVERSION,
        )
        return list((found or {}).get("servers", []))

    def server_action(self, server_id: str, action: dict[str, Any]) -> None:
        """`POST /servers/{id}/action`; a server gone is PermanentError."""
        path = f"/servers/{server_id}/action"
        if self.call("compute", "POST", path, ok=(202,), json=action) is None:
            raise PermanentError(f"the server {server_id} is gone")

    def delete_server(self, server_id: str) -> None:
        """Nova deletes the server (one no stack holds); gone already is done."""
        self.call("compute", "DELETE", f"/servers/{server_id}", ok=(204,))

    def zones(self) -> list[dict[str, Any]]:
        found = self.json("compute", "/os-availability-zone")
        return list((found or {}).get("availabilityZoneInfo", []))

    def flavors(self) -> list[dict[str, Any]]:
        found = self.json("compute", "/flavors/detail", params={"is_public": "None"})
        return list((found or {}).get("flavors", []))

    def images(self) -> list[dict[str, Any]]:
        found = self.json("image", "/images", params={"status": "active", "limit": 1000})
        return list((found or {}).get("images", []))

    def limits(self) -> dict[str, Any]:
        found = self.json("compute", "/limits")
        return dict(((found or {}).get("limits") or {}).get("absolute") or {})
