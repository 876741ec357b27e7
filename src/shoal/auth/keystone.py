"""Authentication mode `keystone`: users' tokens are Keystone's, validated by Keystone.

shoal's own service user (a clouds.yaml entry, openstacksdk's format and lookup) asks
Keystone about each token it has not seen within `cache_seconds` (`GET
/v3/auth/tokens`, as keystonemiddleware does), and trusts the answer that long, never
past the token's expiry. The same user registers shoal in the catalog as the
`container-infra` service, so that `openstack coe ...` with ordinary password
authentication finds it, and takes a **trust** from a user who creates a cluster: the
cluster's servers are then made in that user's project, with that user's roles, by
shoal's service user (as Magnum does), and the trust is removed with the cluster.

keystoneauth1 (through openstacksdk's configuration loader) speaks to Keystone; its
errors are mapped here, at the edge: a refused token is NotAuthenticated (401), a
Keystone that cannot be reached is Unavailable (503).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session
from openstack import exceptions as sdk_exceptions
from openstack.config import loader

from shoal.auth import base
from shoal.domain import policy
from shoal.domain.errors import NotAuthenticated, Unavailable
from shoal.domain.policy import Principal
from shoal.settings import KeystoneSettings, SettingsError

log = logging.getLogger(__name__)
SERVICE_TYPE = "container-infra"
INTERFACES = ("public", "internal", "admin")
IDENTITY = {"service_type": "identity", "interface": "public"}
TRUST_KIND = "keystone-trust"


def open_session(settings: KeystoneSettings) -> tuple[ks_session.Session, dict[str, Any]]:
    """A keystoneauth session as shoal's service user, and its clouds.yaml entry's
    config; SettingsError naming the entry when it cannot be used (reads files only)."""
    files = [settings.clouds_yaml] if settings.clouds_yaml else None
    try:
        config = loader.OpenStackConfig(config_files=files, load_envvars=False)
        kwargs: dict[str, Any] = {}
        if settings.region_name:
            kwargs["region_name"] = settings.region_name
        region = config.get_one(settings.cloud, **kwargs)
        return region.get_session(), dict(region.config)
    except (sdk_exceptions.SDKException, OSError, ValueError) as exc:
        where = settings.clouds_yaml or "openstacksdk's clouds.yaml lookup"
        raise SettingsError(f"SHOAL_KEYSTONE_CLOUD={settings.cloud!r} in {where}: {exc}") from exc
    except Exception as exc:  # keystoneauth: missing auth options, unknown auth type
        raise SettingsError(
            f"SHOAL_KEYSTONE_CLOUD={settings.cloud!r}: {type(exc).__name__}: {exc}"
        ) from exc


def service_of(services: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """Which of the catalog's `container-infra` services shoal points at itself: the
    one named `name` (clients such as the cluster-autoscaler look it up by type and
    name, `magnum`), else the first (`openstack coe` looks up by type only), else None
    (shoal registers one under `name`)."""
    return next((s for s in services if s.get("name") == name), services[0] if services else None)


class KeystoneTokens:
    """Users' Keystone tokens as principals (the project the token is scoped to, the
    user, the user's roles there)."""

    def __init__(self, settings: KeystoneSettings) -> None:
        self.settings = settings
        self.session, config = open_session(settings)
        self.auth_url = str((config.get("auth") or {}).get("auth_url", ""))
        self.region = config.get("region_name") or settings.region_name
        self.challenge: str | None = f'Keystone uri="{self.auth_url}"'
        self._cache = base.PrincipalCache(settings.cache_seconds)

    # -- who is asking ------------------------------------------------------------

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        token = base.token_of(headers)
        if not token:
            raise NotAuthenticated(
                "Authentication required: send a Keystone token in X-Auth-Token "
                "(openstack token issue)"
            )
        key = base.key_of(token)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        principal, expires_at = principal_of(self._validate(token))
        self._cache.put(key, principal, expires_at)
        return principal

    def _validate(self, token: str) -> dict[str, Any]:
        try:
            resp = self.session.get(
                "/auth/tokens",
                endpoint_filter={**IDENTITY, "version": (3, 0)},
                headers={"X-Subject-Token": token},
                raise_exc=False,
            )
        except ks_exceptions.ClientException as exc:
            raise Unavailable(f"Keystone at {self.auth_url} cannot be reached: {exc}") from exc
        if resp.status_code in (401, 403, 404):
            raise NotAuthenticated("The token is not valid (Keystone refused it): get a new one")
        if resp.status_code >= 400:
            raise Unavailable(
                f"Keystone at {self.auth_url} answered {resp.status_code} to a token check"
            )
        data: dict[str, Any] = resp.json().get("token") or {}
        return data

    def forget(self) -> None:
        self._cache.clear()

    def close(self) -> None:
        self.forget()

    # -- the catalog ----------------------------------------------------------------

    def register(self, url: str) -> str:
        """Make the catalog's `container-infra` service point at `url` (shoal's /v1) in
        every interface of this region; what was done, in a line."""
        try:
            return self._register(url)
        except ks_exceptions.ClientException as exc:
            raise Unavailable(
                f"could not register shoal in Keystone's catalog ({exc}); give its service "
                "user the admin role, or register it yourself (openstack service create "
                f"--name {self.settings.service_name} {SERVICE_TYPE}; openstack endpoint "
                f"create ... {url}) and set SHOAL_KEYSTONE_REGISTER=false"
            ) from exc

    def _register(self, url: str) -> str:
        services = self._get("/services", type=SERVICE_TYPE)["services"]
        found = service_of(services, self.settings.service_name)
        if found is not None:
            service_id = str(found["id"])
        else:
            made = self._send(
                "POST",
                "/services",
                {
                    "service": {
                        "type": SERVICE_TYPE,
                        "name": self.settings.service_name,
                        "enabled": True,
                        "description": "shoal (OpenStack Magnum v1 API)",
                    }
                },
            )
            service_id = str(made["service"]["id"])
        endpoints = self._get("/endpoints", service_id=service_id)["endpoints"]
        done = []
        for interface in INTERFACES:
            mine = [
                e
                for e in endpoints
                if e.get("interface") == interface
                and (not self.region or e.get("region_id") in (self.region, None))
            ]
            if not mine:
                body = {"interface": interface, "url": url, "service_id": service_id}
                if self.region:
                    body["region_id"] = self.region
                self._send("POST", "/endpoints", {"endpoint": body})
                done.append(f"{interface} added")
            elif mine[0].get("url") != url:
                self._send("PATCH", f"/endpoints/{mine[0]['id']}", {"endpoint": {"url": url}})
                done.append(f"{interface} moved from {mine[0].get('url')}")
        what = ", ".join(done) if done else "already there"
        named = str((found or {}).get("name") or self.settings.service_name)
        if named != self.settings.service_name:
            what += (
                f"; its name is {named!r}, not {self.settings.service_name!r}: clients that "
                "look it up by name (the cluster-autoscaler: 'magnum') will not find it"
            )
        return f"catalog: {SERVICE_TYPE} at {url} ({what}; named {named!r})"

    def _get(self, path: str, **params: str) -> dict[str, Any]:
        resp = self.session.get(
            path, endpoint_filter={**IDENTITY, "version": (3, 0)}, params=params
        )
        data: dict[str, Any] = resp.json()
        return data

    def _send(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.session.request(
            path, method, endpoint_filter={**IDENTITY, "version": (3, 0)}, json=body
        )
        data: dict[str, Any] = resp.json() if resp.content else {}
        return data

    # -- delegation -----------------------------------------------------------------

    def delegate(self, headers: Mapping[str, str], principal: Principal) -> dict[str, str] | None:
        """A trust from the request's user to shoal's service user in the user's project,
        with the user's roles there (impersonating: the cloud sees the user act); what
        the conductor needs to act with it. None when trusts are off."""
        if not self.settings.trusts:
            return None
        token = base.token_of(headers) or ""
        trustee = self.session.get_user_id()
        body = {
            "trust": {
                "trustor_user_id": principal.user_id,
                "trustee_user_id": trustee,
                "project_id": principal.project_id,
                "impersonation": True,
                "allow_redelegation": False,
                "roles": [{"name": r} for r in sorted(principal.keystone_roles)],
            }
        }
        try:
            resp = self.session.post(
                "/OS-TRUST/trusts",
                endpoint_filter={**IDENTITY, "version": (3, 0)},
                headers={"X-Auth-Token": token},
                authenticated=False,
                json=body,
                raise_exc=False,
            )
        except ks_exceptions.ClientException as exc:
            raise Unavailable(f"Keystone at {self.auth_url} cannot be reached: {exc}") from exc
        if resp.status_code >= 400:
            raise Unavailable(
                f"Keystone refused the trust shoal needs to act for you in project "
                f"{principal.project_id} ({resp.status_code}: {resp.text[:300]})"
            )
        trust = resp.json()["trust"]
        return {
            "kind": TRUST_KIND,
            "trust_id": str(trust["id"]),
            "trustor_user_id": principal.user_id,
            "project_id": principal.project_id,
        }

    def undelegate(self, credential: Mapping[str, str]) -> None:
        """Remove a trust `delegate` made (a cluster deleted, or one never made); gone
        already is done. Unavailable when Keystone cannot do it now."""
        if credential.get("kind") != TRUST_KIND:
            return
        try:
            resp = self.session.delete(
                f"/OS-TRUST/trusts/{credential['trust_id']}",
                endpoint_filter={**IDENTITY, "version": (3, 0)},
                raise_exc=False,
            )
        except ks_exceptions.ClientException as exc:
            raise Unavailable(f"Keystone at {self.auth_url} cannot be reached: {exc}") from exc
        if resp.status_code >= 400 and resp.status_code != 404:
            raise Unavailable(
                f"Keystone refused to remove trust {credential['trust_id']} "
                f"({resp.status_code}: {resp.text[:300]})"
            )


def principal_of(token: Mapping[str, Any]) -> tuple[Principal, datetime | None]:
    """The principal of a validated token's body, and when it expires; NotAuthenticated
    for a token not scoped to a project (shoal's resources all belong to one)."""
    project = token.get("project") or {}
    user = token.get("user") or {}
    if not project.get("id"):
        raise NotAuthenticated(
            "The token is not scoped to a project: ask Keystone for a project-scoped token"
        )
    names = [str(r.get("name", "")) for r in token.get("roles") or []]
    principal = Principal(
        project_id=str(project["id"]),
        user_id=str(user.get("id", "")),
        roles=policy.roles_of(names),
        keystone_roles=frozenset(names),
    )
    expires = token.get("expires_at")
    when = datetime.fromisoformat(expires.replace("Z", "+00:00")) if expires else None
    return principal, when
