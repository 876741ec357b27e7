"""Whose credentials a call uses: the seam between the driver and Keystone.

Every driver call names the **scope** it acts in (the shoal project and cluster of
the machines concerned) and asks an `Identity` for an openstacksdk connection for
that scope. Today one identity exists, `ConfiguredIdentity`: the provider's own
clouds.yaml entry, whatever the scope (shoal without Keystone authentication).

Per-cluster delegated credentials (a Keystone trust to shoal's service user, or
an application credential, made in the caller's project at cluster create and
removed with the cluster) plug in here as another `Identity`: it maps a scope's
cluster to that cluster's delegation and returns a connection authenticated with
it (the clouds.yaml entry's auth_url, region and TLS settings, the delegation's
auth). The driver never stores credentials itself.
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

from shoal.settings import OpenStackSettings, SettingsError


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

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
