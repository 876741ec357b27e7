"""Whose credentials a call uses: the seam between the driver and Keystone.

Every driver call names the **scope** it acts in (the shoal project and cluster of
the machines concerned) and asks an `Identity` for an openstacksdk connection for
that scope. Today one identity exists, `ConfiguredIdentity`: the provider's own
clouds.yaml entry, whatever the scope (shoal without Keystone authentication).

With Keystone authentication (`SHOAL_AUTH=keystone`), a cluster's creator gives
shoal's service user a trust in the creator's project; `DelegatedIdentity` maps a
scope's cluster to that trust (the conductor's `Delegations`) and returns a
connection authenticated as the service user with the trust (a token in the
creator's project, impersonating the creator), so the cluster's servers are made
there. Calls about the whole deployment, and clusters with no trust, use the
provider's own entry. The driver never stores credentials itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import openstack
from keystoneauth1 import session as ks_session
from openstack import exceptions as sdk_exceptions
from openstack.config import cloud_region, loader
from openstack.connection import Connection

from shoal.drivers.contract import Delegations
from shoal.drivers.openstack.settings import OpenStackSettings
from shoal.settings import SettingsError

TRUST_KIND = "keystone-trust"
# Auth options of a clouds.yaml entry that scope a token; a trust scopes it instead.
_SCOPING = (
    "project_id",
    "project_name",
    "project_domain_id",
    "project_domain_name",
    "domain_id",
    "domain_name",
    "system_scope",
)


@dataclass(frozen=True)
class Scope:
    """What a call is about: the shoal project and cluster of its machines (None when
    the call is about the whole deployment, such as the sweeper's listing)."""

    project_id: str | None = None
    cluster_id: str | None = None


DEPLOYMENT = Scope()


class Identity(Protocol):
    """Connections to the cloud, by scope."""

    def connection(self, scope: Scope) -> Connection:
        """A connection for calls about `scope` (no I/O: keystoneauth authenticates on
        the first request and again when its token expires)."""
        ...

    def connections(self) -> list[Connection]:
        """Every connection opened so far (each project shoal acts in), for tidying."""
        ...

    def close(self) -> None: ...


def load_region(settings: OpenStackSettings) -> cloud_region.CloudRegion:
    """The clouds.yaml entry `settings.cloud` (openstacksdk's own lookup unless
    `clouds_yaml` names the file). Reads local files only. SettingsError when the
    file or the entry cannot be used."""
    files = [settings.clouds_yaml] if settings.clouds_yaml else None
    try:
        config = loader.OpenStackConfig(config_files=files, load_envvars=False)
        kwargs: dict[str, Any] = {"api_timeout": settings.api_timeout}
        if settings.region_name:
            kwargs["region_name"] = settings.region_name
        return config.get_one(settings.cloud, **kwargs)
    except (sdk_exceptions.SDKException, OSError, ValueError) as exc:
        where = settings.clouds_yaml or "openstacksdk's clouds.yaml lookup"
        raise SettingsError(f"cloud {settings.cloud!r} in {where}: {exc}") from exc
    except Exception as exc:  # keystoneauth: missing auth options, unknown auth type
        raise SettingsError(f"cloud {settings.cloud!r}: {type(exc).__name__}: {exc}") from exc


def connect(region: cloud_region.CloudRegion, pool_size: int) -> Connection:
    """A connection over `region` whose HTTP pool holds `pool_size` connections per
    host, so that that many parallel calls reuse their connections."""
    conn = openstack.connection.Connection(config=region)
    session = conn.session
    adapter = ks_session.TCPKeepAliveAdapter(pool_connections=4, pool_maxsize=pool_size)
    for prefix in ("https://", "http://"):
        session.session.mount(prefix, adapter)
    return conn


class ConfiguredIdentity:
    """The provider's own clouds.yaml entry for every scope: one connection, shared
    by every thread (keystoneauth guards its token; requests' pool is thread-safe)."""

    def __init__(self, make: Callable[[], Connection]) -> None:
        self._make = make
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def connection(self, scope: Scope) -> Connection:
        with self._lock:
            if self._conn is None:
                self._conn = self._make()
            return self._conn

    def connections(self) -> list[Connection]:
        return [self.connection(DEPLOYMENT)]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def trust_region(trustee: cloud_region.CloudRegion, trust_id: str) -> cloud_region.CloudRegion:
    """The trustee's clouds.yaml entry (shoal's service user) scoped to `trust_id`
    instead of its own project: same auth_url, user, region, timeouts and TLS."""
    cfg = dict(trustee.config)
    auth = {k: v for k, v in (cfg.get("auth") or {}).items() if k not in _SCOPING}
    auth["trust_id"] = trust_id
    keep = ("region_name", "interface", "api_timeout", "verify", "cacert", "cert", "key")
    kwargs = {k: cfg[k] for k in keep if cfg.get(k) is not None}
    config = loader.OpenStackConfig(load_yaml_config=False, load_envvars=False)
    return config.get_one(auth_type="password", auth=auth, **kwargs)


class DelegatedIdentity:
    """A cluster's trust where it has one (its servers live in its creator's project),
    else the provider's own identity. One connection per trust, kept while the
    process runs (keystoneauth renews its token)."""

    def __init__(
        self,
        own: Identity,
        trustee: cloud_region.CloudRegion,
        delegations: Delegations,
        pool_size: int,
    ) -> None:
        self._own = own
        self._trustee = trustee
        self._delegations = delegations
        self._pool_size = pool_size
        self._conns: dict[str, tuple[str, Connection]] = {}  # cluster -> (trust, conn)
        self._lock = threading.Lock()

    def connection(self, scope: Scope) -> Connection:
        found = self._delegations.of(scope.cluster_id) if scope.cluster_id else None
        if scope.cluster_id is None or found is None or found.kind != TRUST_KIND:
            return self._own.connection(scope)
        trust_id = found.values["trust_id"]
        with self._lock:
            known = self._conns.get(scope.cluster_id)
            if known is None or known[0] != trust_id:
                conn = connect(trust_region(self._trustee, trust_id), self._pool_size)
                known = self._conns[scope.cluster_id] = (trust_id, conn)
            return known[1]

    def connections(self) -> list[Connection]:
        """The provider's, and one per project among the trusts of clusters that still
        have theirs (a project's clusters see the same things there); the connections
        of trusts gone with their clusters are closed here."""
        with self._lock:
            held = dict(self._conns)
        live, projects = [], set()
        for cluster_id, (trust_id, conn) in held.items():
            found = self._delegations.of(cluster_id)
            if found is not None and found.values.get("trust_id") == trust_id:
                project = found.values.get("project_id")
                if project not in projects:
                    projects.add(project)
                    live.append(conn)
                continue
            with self._lock:
                if self._conns.get(cluster_id, (None,))[0] == trust_id:
                    del self._conns[cluster_id]
            conn.close()
        return [*self._own.connections(), *live]

    def close(self) -> None:
        with self._lock:
            for _, conn in self._conns.values():
                conn.close()
            self._conns.clear()
        self._own.close()
