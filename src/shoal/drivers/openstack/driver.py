"""OpenStackDriver: the driver contract over Nova (docs/drivers.md, "The openstack
driver").

A machine is a Nova server tagged with the deployment and shoal's four tags. A
listing is one `GET /servers/detail?tags=...`; a create first looks for a server
with the node's tag (one request), so a repeated create finds the first one's
server; a delete is idempotent (404 is done). Every SDK and keystoneauth exception
is mapped at this edge (errors.py). Which credentials a call uses is the
`Identity`'s business (identity.py); the driver only names each call's scope.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from openstack.compute.v2.server import Server
from openstack.connection import Connection

from shoal.drivers import contract
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    Capabilities,
    DriverError,
    Feature,
    Machine,
    MachineSpec,
    MachineState,
    PermanentError,
    TransientError,
)
from shoal.drivers.openstack import boot, catalog, errors, servers
from shoal.drivers.openstack.identity import DEPLOYMENT, Identity, Scope
from shoal.drivers.openstack.ledger import Ledger
from shoal.drivers.openstack.servergroups import ServerGroups
from shoal.settings import OpenStackSettings

log = logging.getLogger(__name__)

FEATURES = frozenset({Feature.REBOOT, Feature.REBUILD})
REBOOTING = frozenset({"REBOOT", "HARD_REBOOT"})


class OpenStackDriver:
    """The `openstack` driver: machines are Nova servers of one cloud project."""

    name = "openstack"

    def __init__(self, settings: OpenStackSettings, identity: Identity) -> None:
        assert settings.deployment is not None, "deployment is a required setting"
        self.settings = settings
        self.deployment: str = settings.deployment
        self.identity = identity
        self.catalog = catalog.Catalog()
        self.groups = ServerGroups(self.deployment, settings.server_group_grace_seconds)
        self.networks = boot.Networks()
        self.ledger = Ledger()
        self._catalog_lock = threading.Lock()

    # ------------------------------------------------------------ what it offers
    def capabilities(self) -> Capabilities:
        """The zones, flavors and images of the last look (no I/O)."""
        cat = self.catalog
        return Capabilities(
            availability_zones=cat.zones,
            flavors=cat.flavor_names,
            images=cat.image_names,
            features=FEATURES,
        )

    def check(self) -> Capabilities:
        """Look at the cloud now: zones, flavors, images (three requests), and remove
        this deployment's server groups that stayed empty. TransientError when the
        cloud cannot be reached or refuses the provider's credentials."""
        conn = self.identity.connection(DEPLOYMENT)
        self._refresh(conn)
        try:
            with errors.edge():
                self.groups.collect(conn)
        except DriverError as exc:
            log.warning("openstack: cannot tidy server groups now: %s", exc.reason)
        return self.capabilities()

    def validate(self, spec: MachineSpec) -> list[str]:
        """Unknown flavor, image or zone (from the cached catalog), and what this
        driver cannot do (volumes, unknown options). No remote I/O."""
        found = self.catalog.problems(spec.flavor_id, spec.image_id, spec.availability_zone)
        return found + boot.problems(spec)

    # ------------------------------------------------------------------ machines
    def ensure_machine(self, spec: MachineSpec) -> Machine:
        """Idempotent on machine_id: the server tagged with it, else a new one.
        Transient, Blocked (quota; no valid host) or Permanent (unknown flavor,
        image, zone, network; what `validate` refuses)."""
        scope = Scope(spec.project_id, spec.cluster_id)
        conn = self.identity.connection(scope)
        zone = spec.availability_zone
        with errors.edge(zone):
            found = self._find(conn, spec.machine_id, scope)
            if found is not None:
                return servers.machine(found)
            age = self.ledger.unsettled(spec.machine_id, self.settings.create_settle_seconds)
            if age is not None:
                raise TransientError(
                    f"the create of {spec.name} got no answer {age:.0f} s ago and its server "
                    "may still appear; it is not created again before "
                    f"{self.settings.create_settle_seconds:g} s have passed"
                )
            flavor_id, image_id = self._resolve(conn, spec)
            tags, metadata = servers.labels(self.deployment, spec)
            attrs = boot.create_attrs(
                spec,
                self.settings,
                flavor_id=flavor_id,
                image_id=image_id,
                networks=self.networks.request(conn, spec.networks or self.settings.networks),
                tags=tags,
                metadata=metadata,
                server_group=lambda: self._server_group(conn, spec),
            )
        server = self._post(conn, spec, attrs)
        self.ledger.remember(spec.machine_id, server.id, scope)
        return Machine(
            machine_id=spec.machine_id,
            name=spec.name,
            state=MachineState.BUILDING,
            tags={servers.TAG_DEPLOYMENT: self.deployment, **spec.tags},
            availability_zone=zone,
            provider_id=server.id,
            image_id=spec.image_id,
            flavor_id=spec.flavor_id,
        )

    def delete_machine(self, machine_id: str) -> None:
        """Idempotent: a server gone (404) or going is done. TransientError only."""
        known = self.ledger.known(machine_id)
        scope = known.scope if known else DEPLOYMENT
        conn = self.identity.connection(scope)
        try:
            with errors.edge():
                if known is not None:
                    ids = [known.server_id]
                else:
                    ids = [s.id for s in self._tagged(conn, {contract.TAG_NODE: machine_id})]
                for server_id in ids:
                    conn.compute.delete_server(server_id, ignore_missing=True)
        except TransientError:
            raise
        except DriverError as exc:  # never Blocked nor Permanent: a delete is retried
            raise TransientError(f"the cloud refused the delete for now: {exc.reason}") from exc
        self.ledger.forget(machine_id)

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        """Every server of this deployment whose tags include `tags`, in one request
        (pages of Nova's max_limit). Two servers of one node: the oldest is reported
        and the others deleted. TransientError only."""
        scope = Scope(tags.get(contract.TAG_PROJECT), tags.get(contract.TAG_CLUSTER))
        conn = self.identity.connection(scope)
        with errors.edge():
            found = self._tagged(conn, tags)
        by_node: dict[str, list[Server]] = {}
        for s in found:
            mid = servers.machine_id_of(s)
            if mid:
                by_node.setdefault(mid, []).append(s)
        out = []
        for mid, group in by_node.items():
            kept, extra = servers.canonical(group)
            if extra:
                self._delete_duplicates(conn, mid, extra)
            self.ledger.remember(mid, kept.id, scope)
            out.append(servers.machine(kept))
        return out

    def reboot_machine(self, machine_id: str) -> None:
        """A soft reboot; one under way is not restarted. Transient, or Permanent when
        the machine does not exist or is being deleted."""
        conn, server = self._existing(machine_id)
        if (server.status or "").upper() in REBOOTING:
            return
        with errors.edge():
            conn.compute.reboot_server(server.id, "SOFT")

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Reinstall with `image_id`, keeping id, name and address; a rebuild to that
        image under way is not restarted. Transient or Permanent."""
        conn, server = self._existing(machine_id)
        meta = dict(server.metadata or {})
        if (server.status or "").upper() == "REBUILD" and meta.get(servers.META_IMAGE) == image_id:
            return
        with errors.edge():
            image = self._image(conn, image_id)
            meta[servers.META_IMAGE] = image_id
            conn.compute.rebuild_server(server.id, image, metadata=meta)

    # ------------------------------------------------------------------- helpers
    def _tagged(self, conn: Connection, tags: Mapping[str, str]) -> list[Server]:
        """This deployment's servers whose tags include `tags` (one request per page)."""
        q = servers.query(self.deployment, tags)
        return [
            s
            for s in conn.compute.servers(details=True, tags=q)
            if servers.matches(s, self.deployment, tags)
        ]

    def _find(self, conn: Connection, machine_id: str, scope: Scope) -> Server | None:
        """The server of `machine_id`, if one exists (duplicates are removed)."""
        found = self._tagged(conn, {contract.TAG_NODE: machine_id})
        if not found:
            return None
        kept, extra = servers.canonical(found)
        if extra:
            self._delete_duplicates(conn, machine_id, extra)
        self.ledger.remember(machine_id, kept.id, scope)
        return kept

    def _existing(self, machine_id: str) -> tuple[Connection, Server]:
        """The server of `machine_id`, not being deleted; PermanentError otherwise."""
        known = self.ledger.known(machine_id)
        scope = known.scope if known else DEPLOYMENT
        conn = self.identity.connection(scope)
        with errors.edge():
            server = self._find(conn, machine_id, scope)
        if server is None or servers.state_of(server)[0] is MachineState.DELETING:
            raise PermanentError(f"machine {machine_id} does not exist (or is being deleted)")
        return conn, server

    def _delete_duplicates(self, conn: Connection, machine_id: str, extra: list[Server]) -> None:
        for s in extra:
            if servers.state_of(s)[0] is MachineState.DELETING:
                continue
            log.warning(
                "openstack: machine %s has a second server %s; deleting it", machine_id, s.id
            )
            try:
                with errors.edge():
                    conn.compute.delete_server(s.id, ignore_missing=True)
            except DriverError as exc:  # the next listing tries again
                log.warning("openstack: cannot delete server %s now: %s", s.id, exc.reason)

    def _refresh(self, conn: Connection) -> catalog.Catalog:
        with self._catalog_lock, errors.edge():
            self.catalog = catalog.load(conn)
        return self.catalog

    def _resolve(self, conn: Connection, spec: MachineSpec) -> tuple[str, str]:
        """The flavor and image ids of `spec`, from the catalog (refreshed when it is
        old or does not know them); PermanentError naming what does not exist."""
        cat = self.catalog
        stale = cat.age() > self.settings.catalog_refresh_seconds
        if stale or cat.problems(spec.flavor_id, spec.image_id, spec.availability_zone):
            cat = self._refresh(conn)
        problems = cat.problems(spec.flavor_id, spec.image_id, spec.availability_zone)
        problems += boot.problems(spec)
        flavor, image = cat.flavor(spec.flavor_id), cat.image(spec.image_id)
        if problems or flavor is None or image is None:
            raise PermanentError("; ".join(problems) or "flavor or image unknown")
        return flavor, image

    def _image(self, conn: Connection, ref: str) -> str:
        """The id of image `ref` (refreshing the catalog when it does not know it)."""
        image = self.catalog.image(ref)
        if image is None:
            image = self._refresh(conn).image(ref)
        if image is None:
            known = ", ".join(self.catalog.image_names) or "none"
            raise PermanentError(f"image {ref!r} does not exist in the cloud (images: {known})")
        return image

    def _server_group(self, conn: Connection, spec: MachineSpec) -> str | None:
        group = spec.placement_group
        return self.groups.ensure(conn, group) if group is not None else None

    def _post(self, conn: Connection, spec: MachineSpec, attrs: dict[str, object]) -> Server:
        """`POST /servers`; an answer that never came is remembered (ledger.py)."""
        try:
            return conn.compute.create_server(**attrs)
        except errors.HANDLED as exc:
            err = errors.mapped(exc, spec.availability_zone)
            status = errors.status_of(exc)
            if isinstance(err, TransientError) and (status is None or status >= 500):
                self.ledger.lost(spec.machine_id)
            zone = spec.availability_zone
            said = err.reason.lower()
            unavailable = "availability zone" in said and "not available" in said
            if status == 400 and unavailable and zone in self.catalog.zones:
                # A zone that exists (Nova listed it) with no enabled host: full, for now.
                raise BlockedError(
                    f"no valid host: availability zone {zone} is not available now ({err.reason})",
                    BlockedKind.NO_VALID_HOST,
                    az=zone,
                ) from exc
            group = spec.placement_group
            if group is not None and status in (400, 404) and "group" in err.reason.lower():
                self.groups.forget(group)  # removed meanwhile: made again on the retry
                raise TransientError(f"its server group is gone: {err.reason}") from exc
            raise err from exc
