"""OpenStackDriver: the driver contract over Nova (docs/drivers.md, "The openstack
driver").

A machine is a Nova server tagged with the deployment and shoal's four tags. A
listing is one `GET /servers/detail?tags=...` (a page per 1,000 servers). A create
is one `POST /servers` once the machine is known to have no server (a recent
listing did not show it, or a lookup by its tag finds none), so a repeated create
finds the first one's server. A delete is idempotent (404 is done). Every SDK and
keystoneauth exception is mapped at this edge (errors.py). Which credentials a
call uses is the `Identity`'s business (identity.py); the driver names each
call's scope.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

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
from shoal.drivers.openstack.nova import Compute
from shoal.drivers.openstack.servergroups import ServerGroups
from shoal.drivers.openstack.settings import OpenStackSettings

log = logging.getLogger(__name__)

FEATURES = frozenset({Feature.REBOOT, Feature.REBUILD, Feature.RELEASE})
PACE_S = 1.0  # Nova boots and deletes in seconds to minutes (Capabilities.pace_seconds)
REBOOTING = frozenset({"REBOOT", "HARD_REBOOT"})
# A listing this recent that did not show a machine lets its create skip the lookup.
LISTING_FRESH_S = 30.0


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
        self._computes: dict[int, Compute] = {}
        self._computes_lock = threading.Lock()

    # ------------------------------------------------------------ what it offers
    def capabilities(self) -> Capabilities:
        """The zones, flavors and images of the last look (no I/O)."""
        cat = self.catalog
        return Capabilities(
            availability_zones=cat.zones,
            flavors=cat.flavor_names,
            flavor_sizes=cat.flavor_sizes,
            images=cat.image_names,
            features=FEATURES,
            pace_seconds=PACE_S,
        )

    def check(self) -> Capabilities:
        """Look at the cloud now: zones, flavors, images (three requests), and remove
        this deployment's server groups that stayed empty. TransientError when the
        cloud cannot be reached or refuses the provider's credentials."""
        conn = self.identity.connection(DEPLOYMENT)
        self._refresh(conn)
        for each in self.identity.connections():  # the provider's, and clusters' trusts
            try:
                with errors.edge():
                    self.groups.collect(each)
            except DriverError as exc:
                log.warning("openstack: cannot tidy server groups now: %s", exc.reason)
        return self.capabilities()

    def release_cluster(self, project_id: str, cluster_id: str) -> None:
        """Delete this deployment's server groups in the cluster's project (its
        creator's, with a trust) that are empty but for the cluster's own servers Nova
        may still list while it deletes them, now that its machines are gone (a group
        waiting for Nova to drop its last member leaked): the trust goes next,
        and with it shoal's way into that project. A cluster without a trust shares the
        provider's project, which `check` tidies after the grace period (a group just
        made for another cluster is empty too). TransientError only."""
        conn = self.identity.connection(Scope(project_id, cluster_id))
        if conn is self.identity.connection(DEPLOYMENT):
            return
        nova = self._compute(conn)

        def leaving(server_id: str) -> bool:
            """A member Nova has deleted, or one of this cluster's (being deleted)."""
            server = nova.get(server_id)
            meta = (server or {}).get("metadata") or {}
            return server is None or meta.get(contract.TAG_CLUSTER) == cluster_id

        try:
            with errors.edge():
                self.groups.collect(conn, grace_s=0.0, leaving=leaving)
        except TransientError:
            raise
        except DriverError as exc:
            raise TransientError(f"cannot remove server groups now: {exc.reason}") from exc

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
        nova = self._compute(conn)
        zone = spec.availability_zone
        with errors.edge(zone):
            found = self._existing_server(nova, spec, scope)
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
            group = spec.placement_group if self.settings.server_groups else None
            body = boot.create_body(
                spec,
                flavor_id=flavor_id,
                image_id=image_id,
                networks=self.networks.request(conn, spec.networks or self.settings.networks),
                tags=tags,
                metadata=metadata,
                server_group=self.groups.ensure(conn, group) if group is not None else None,
            )
        made = self._post(nova, spec, body)
        self.ledger.remember(spec.machine_id, str(made["id"]), scope)
        return Machine(
            machine_id=spec.machine_id,
            name=spec.name,
            state=MachineState.BUILDING,
            tags={servers.TAG_DEPLOYMENT: self.deployment, **spec.tags},
            availability_zone=zone,
            provider_id=str(made["id"]),
            image_id=spec.image_id,
            flavor_id=spec.flavor_id,
        )

    def delete_machine(self, machine_id: str) -> None:
        """Idempotent: a server gone (404) or going is done. TransientError only."""
        known = self.ledger.known(machine_id)
        nova = self._compute(self.identity.connection(known.scope if known else DEPLOYMENT))
        try:
            with errors.edge():
                if known is not None:
                    ids = [known.server_id]
                else:
                    tagged = self._tagged(nova, {contract.TAG_NODE: machine_id})
                    ids = [str(s["id"]) for s in tagged]
                for server_id in ids:
                    nova.delete(server_id)
        except TransientError:
            raise
        except DriverError as exc:  # never Blocked nor Permanent: a delete is retried
            raise TransientError(f"the cloud refused the delete for now: {exc.reason}") from exc
        self.ledger.forget(machine_id)

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        """Every server of this deployment whose tags include `tags`, in one request
        (a page per 1,000). Two servers of one node: the oldest is reported and the
        others deleted. TransientError only."""
        scope = Scope(tags.get(contract.TAG_PROJECT), tags.get(contract.TAG_CLUSTER))
        nova = self._compute(self.identity.connection(scope))
        asked = self.ledger.clock()
        with errors.edge():
            found = self._tagged(nova, tags)
        by_node: dict[str, list[servers.Server]] = {}
        for s in found:
            mid = servers.machine_id_of(s)
            if mid:
                by_node.setdefault(mid, []).append(s)
        out = []
        for mid, group in by_node.items():
            kept, extra = servers.canonical(group)
            if extra:
                self._delete_duplicates(nova, mid, extra)
            m = servers.machine(kept)
            address = self.ledger.remember(mid, m.provider_id or "", scope, m.address)
            out.append(m if address == m.address else replace(m, address=address))
        self.ledger.listed(tags, asked, by_node)
        return out

    def reboot_machine(self, machine_id: str) -> None:
        """A soft reboot; one under way is not restarted. Transient, or Permanent when
        the machine does not exist or is being deleted."""
        nova, server = self._running(machine_id)
        if str(server.get("status", "")).upper() in REBOOTING:
            return
        with errors.edge():
            nova.action(str(server["id"]), {"reboot": {"type": "SOFT"}})

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Reinstall with `image_id`, keeping id, name and address; a rebuild to that
        image under way is not restarted. Transient or Permanent."""
        nova, server = self._running(machine_id)
        meta = dict(server.get("metadata") or {})
        rebuilding = str(server.get("status", "")).upper() == "REBUILD"
        if rebuilding and meta.get(servers.META_IMAGE) == image_id:
            return
        with errors.edge():
            image = self._image(nova.conn, image_id)
            meta[servers.META_IMAGE] = image_id  # the rebuild replaces the metadata whole
            nova.action(str(server["id"]), {"rebuild": {"imageRef": image, "metadata": meta}})

    # ------------------------------------------------------------------- helpers
    def _compute(self, conn: Connection) -> Compute:
        with self._computes_lock:
            nova = self._computes.get(id(conn))
            if nova is None or nova.conn is not conn:
                nova = self._computes[id(conn)] = Compute(conn)
            return nova

    def _tagged(self, nova: Compute, tags: Mapping[str, str]) -> list[servers.Server]:
        """This deployment's servers whose tags include `tags`."""
        q = servers.query(self.deployment, tags)
        return [s for s in nova.list({"tags": q}) if servers.matches(s, self.deployment, tags)]

    def _existing_server(
        self, nova: Compute, spec: MachineSpec, scope: Scope
    ) -> servers.Server | None:
        """The server of `spec`'s machine, if it has one: by its id when this process
        made or listed it, else by its tag, unless a recent listing says it has none."""
        mid = spec.machine_id
        known = self.ledger.known(mid)
        if known is not None:
            server = nova.get(known.server_id)
            if server is not None and servers.machine_id_of(server) == mid:
                return server
            self.ledger.forget(mid)  # gone (or not ours): look again by tag
        elif self.ledger.absent(mid, spec.tags, LISTING_FRESH_S):
            return None
        return self._find(nova, mid, scope)

    def _find(self, nova: Compute, machine_id: str, scope: Scope) -> servers.Server | None:
        """The server tagged with `machine_id`, if one exists (duplicates are removed)."""
        found = self._tagged(nova, {contract.TAG_NODE: machine_id})
        if not found:
            return None
        kept, extra = servers.canonical(found)
        if extra:
            self._delete_duplicates(nova, machine_id, extra)
        self.ledger.remember(machine_id, str(kept["id"]), scope)
        return kept

    def _running(self, machine_id: str) -> tuple[Compute, servers.Server]:
        """The server of `machine_id`, not being deleted; PermanentError otherwise."""
        known = self.ledger.known(machine_id)
        scope = known.scope if known else DEPLOYMENT
        nova = self._compute(self.identity.connection(scope))
        with errors.edge():
            server = self._find(nova, machine_id, scope)
        if server is None or servers.state_of(server)[0] is MachineState.DELETING:
            raise PermanentError(f"machine {machine_id} does not exist (or is being deleted)")
        return nova, server

    def _delete_duplicates(
        self, nova: Compute, machine_id: str, extra: list[servers.Server]
    ) -> None:
        for s in extra:
            if servers.state_of(s)[0] is MachineState.DELETING:
                continue
            log.warning("openstack: machine %s has a second server %s; deleting it",
                        machine_id, s["id"])  # fmt: skip
            try:
                with errors.edge():
                    nova.delete(str(s["id"]))
            except DriverError as exc:  # the next listing tries again
                log.warning("openstack: cannot delete server %s now: %s", s["id"], exc.reason)

    def _refresh(self, conn: Connection, seen: catalog.Catalog | None = None) -> catalog.Catalog:
        """Load the catalog now; when `seen` is given, only if no other thread has
        replaced it since the caller looked (ten creates that find it stale together
        load it once)."""
        with self._catalog_lock, errors.edge():
            if seen is None or self.catalog is seen:
                self.catalog = catalog.load(conn)
        return self.catalog

    def _resolve(self, conn: Connection, spec: MachineSpec) -> tuple[str, str]:
        """The flavor and image ids of `spec`, from the catalog (refreshed when it is
        old or does not know them); PermanentError naming what does not exist."""
        cat = self.catalog
        stale = cat.age() > self.settings.catalog_refresh_seconds
        if stale or cat.problems(spec.flavor_id, spec.image_id, spec.availability_zone):
            cat = self._refresh(conn, seen=cat)
        problems = cat.problems(spec.flavor_id, spec.image_id, spec.availability_zone)
        problems += boot.problems(spec)
        flavor, image = cat.flavor(spec.flavor_id), cat.image(spec.image_id)
        if problems or flavor is None or image is None:
            raise PermanentError("; ".join(problems) or "flavor or image unknown")
        return flavor, image

    def _image(self, conn: Connection, ref: str) -> str:
        """The id of image `ref` (refreshing the catalog when it does not know it)."""
        cat = self.catalog
        image = cat.image(ref)
        if image is None:
            image = self._refresh(conn, seen=cat).image(ref)
        if image is None:
            known = ", ".join(self.catalog.image_names) or "none"
            raise PermanentError(f"image {ref!r} does not exist in the cloud (images: {known})")
        return image

    def _post(self, nova: Compute, spec: MachineSpec, body: dict[str, Any]) -> dict[str, Any]:
        """`POST /servers`; an answer that never came is remembered (ledger.py)."""
        try:
            return nova.create(body)
        except errors.HANDLED as exc:
            raise self._refused(spec, exc) from exc

    def _refused(self, spec: MachineSpec, exc: BaseException) -> DriverError:
        """The error to raise for a create the cloud refused (or did not answer)."""
        err = errors.mapped(exc, spec.availability_zone)
        status = errors.status_of(exc)
        if isinstance(err, TransientError) and (status is None or status >= 500):
            self.ledger.lost(spec.machine_id)
        zone = spec.availability_zone
        said = err.reason.lower()
        unavailable = "availability zone" in said and "not available" in said
        if status == 400 and unavailable and zone in self.catalog.zones:
            # A zone that exists (Nova listed it) with no enabled host: full, for now.
            return BlockedError(
                f"no valid host: availability zone {zone} is not available now ({err.reason})",
                BlockedKind.NO_VALID_HOST,
                az=zone,
            )
        group = spec.placement_group
        if group is not None and status in (400, 404) and "group" in said:
            self.groups.forget(group)  # removed meanwhile: made again on the retry
            return TransientError(f"its server group is gone: {err.reason}")
        return err
