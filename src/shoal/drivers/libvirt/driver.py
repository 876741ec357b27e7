"""LibvirtDriver: the driver contract over a set of libvirt hosts (docs/drivers.md).

Each host is an availability zone and a target of its own. A machine is a domain
whose UUID is shoal's node uuid (so a repeated create finds the first one), with
shoal's tags in its metadata, a copy-on-write overlay of its image's base disk, and
its user data on the kernel command line (kernel images; never the node agent's token,
see `template.cmdline`) or in a NoCloud seed ISO (disk images). Placement is shoal's own
accounting (placement.py): a spec naming a host that is full is BlockedError(NO_VALID_HOST,
az=host), and the conductor tries the group's next zone; a spec naming none goes to
the emptiest host with room. A host that another process filled meanwhile is found
when shoal looks again right after defining: the new machine is then not started and
reads as failed with "No valid host was found" (fault_kind NO_VALID_HOST).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

from shoal.domain import bootstrap
from shoal.drivers.contract import (
    TAG_CLUSTER,
    BlockedError,
    BlockedKind,
    Capabilities,
    Feature,
    FlavorSize,
    Machine,
    MachineSpec,
    MachineState,
    PermanentError,
    TransientError,
)
from shoal.drivers.libvirt import errors, facts, placement, template, volumes
from shoal.drivers.libvirt import seed as nocloud
from shoal.drivers.libvirt.facts import XMLNS, Meta
from shoal.drivers.libvirt.hosts import Hosts
from shoal.drivers.libvirt.listing import Looker, Seen
from shoal.drivers.libvirt.settings import (
    LibvirtFlavor,
    LibvirtImage,
    LibvirtSettings,
)

FEATURES = frozenset({Feature.REBOOT, Feature.REBUILD})
PACE_S = 1.0  # VMs boot and go in seconds (Capabilities.pace_seconds)
# A domain shoal defined but that does not run yet (its start is on its way) reads as
# BUILDING this long, then as ERROR: nothing shut it down on shoal's behalf.
START_GRACE_S = 120.0
STRICT = {"anti-affinity"}
METADATA_ELEMENT = 2  # VIR_DOMAIN_METADATA_ELEMENT
AFFECT_CONFIG = 2  # VIR_DOMAIN_AFFECT_CONFIG
OPERATION_INVALID = 55
VM_FLAVOR = "vm"  # hosted: a VM's size is its slot's


class LibvirtDriver:
    """The `libvirt` driver: machines are domains on the provider's hosts."""

    name = "libvirt"

    def __init__(self, settings: LibvirtSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.hosts = Hosts(settings.hosts)
        self.looker = Looker(self.hosts, settings.network)
        self.template = template.load(settings)
        self.flavors = {f.name: f for f in settings.flavors}
        self.images = {i.name: i for i in settings.images}
        self.clock = clock
        # per host: the use as last looked at, and the domains that look saw
        self._looked: dict[str, tuple[placement.Use, frozenset[str]]] = {}
        # per host: machines being made by this process, not yet seen in a look
        self._pending: dict[str, dict[str, tuple[LibvirtFlavor, str]]] = {}
        self._where: dict[str, str] = {}  # machine id -> host, as last seen
        self._place_lock = threading.Lock()  # choosing a host and reserving room there
        self._host_locks = {h: threading.Lock() for h in self.hosts.names}  # rebuilds
        self._machine_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    features = FEATURES

    # ------------------------------------------------------------------ the hosts
    # Where the machines are: the provider's hosts. The hosted driver (hosted.py)
    # overrides these with the virt hosts of the clusters.
    def _host_names(self, cluster_id: str | None = None) -> tuple[str, ...]:
        """The hosts to look on (of the machines of cluster `cluster_id`, when named)."""
        return self.hosts.names

    def _size(self, spec: MachineSpec) -> list[str]:
        """What is wrong with the machine's size and zone, from the settings."""
        problems = []
        if spec.flavor_id not in self.flavors:
            known = ", ".join(self.flavors)
            problems.append(f"flavor {spec.flavor_id!r} does not exist (flavors: {known})")
        az = spec.availability_zone
        if az is not None and az not in self.hosts.settings:
            known = ", ".join(self.hosts.names)
            problems.append(f"availability zone {az!r} is not a host of this provider ({known})")
        return problems

    def _target(self, spec: MachineSpec) -> None:
        """Ready the machine's host before it is made (the hosted driver reaches it)."""

    def _measure(self, host: str) -> None:
        """Learn the host's size when the settings do not give it (hosted: from the host)."""

    def _foreign(self, meta: Meta, host: str) -> bool:
        """A domain listed on `host` that is another host's (virt hosts sharing one
        libvirtd, in tests): not the provider's hosts, which never share one."""
        return False

    # ------------------------------------------------------------------ contract
    def capabilities(self) -> Capabilities:
        """The hosts as zones, the flavors and images of the settings. No I/O."""
        return Capabilities(
            availability_zones=self.hosts.names,
            flavors=tuple(self.flavors),
            flavor_sizes={
                f.name: FlavorSize(f.vcpus, f.ram_mb, f.disk_gb) for f in self.flavors.values()
            },
            images=tuple(self.images),
            features=self.features,
            zones_are_targets=True,
            pace_seconds=PACE_S,
        )

    def check(self) -> Capabilities:
        """Reach every host and find the network and pool there. TransientError naming
        the first host that cannot serve (unreachable, or missing network or pool)."""
        for host in self._host_names():
            try:
                self.hosts.call(host, self._check_host)
            except PermanentError as exc:
                raise TransientError(exc.reason) from exc
        return self.capabilities()

    def _check_host(self, conn: Any) -> None:
        conn.networkLookupByName(self.settings.network)
        if any(im.disk for im in self.images.values()):
            conn.storagePoolLookupByName(self.settings.pool)

    def validate(self, spec: MachineSpec) -> list[str]:
        """Unknown flavor, image, host or option; from the settings, never raises."""
        problems = self._size(spec)
        if spec.image_id not in self.images:
            known = ", ".join(self.images) or "none configured"
            problems.append(f"image {spec.image_id!r} does not exist (images: {known})")
        for key in sorted(spec.options):
            problems.append(f"option {key!r} is not an option of the libvirt driver (it has none)")
        return problems

    def ensure_machine(self, spec: MachineSpec) -> Machine:
        """Idempotent on machine_id (the domain's UUID). Blocked (a full host),
        Permanent (unknown flavor, image or host; a template or image that cannot
        work), Transient (a host unreachable or busy)."""
        problems = self.validate(spec)
        if problems:
            raise PermanentError("; ".join(problems))
        self._target(spec)
        with self._machine(spec.machine_id):
            found = self._find(spec.machine_id, spec.availability_zone)
            if found is None:
                host, seen = self._create(spec)
            else:
                host, seen = found[0], self._seen(*found)
            if seen.facts.meta is None or seen.facts.meta.scope != self.settings.scope:
                raise PermanentError(
                    f"a domain with uuid {spec.machine_id} on libvirt host {host} is not "
                    "this deployment's"
                )
            if not seen.running and not seen.facts.meta.fault:
                seen = self._start(host, seen)
            return self._as_machine(host, seen, None)

    def delete_machine(self, machine_id: str) -> None:
        """Destroy and undefine the domain, delete its disk. Idempotent: unknown is done.
        TransientError only."""
        with self._machine(machine_id):
            try:
                found = self._find(machine_id, None)
                targets = [found[0]] if found else list(self._host_names())
                if found is not None:
                    self.hosts.call(found[0], lambda _c: _destroy_and_undefine(found[1]))
                pool = self.settings.pool
                for host in targets:  # a half-made machine may have left only its disk
                    self.hosts.call(
                        host, partial(volumes.delete_all, pool=pool, machine_id=machine_id)
                    )
            except PermanentError as exc:
                raise TransientError(exc.reason) from exc
            with self._lock:
                self._where.pop(machine_id, None)
                self._looked.pop(found[0] if found else "", None)

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        """shoal's machines whose tags include `tags`: one listing per host (plus one
        lease table per host while machines wait for an address). TransientError."""
        out: list[Machine] = []
        for host in self._host_names(tags.get(TAG_CLUSTER)):
            seen = self.looker.look(host)
            use = placement.use_of(((s.facts, s.running) for s in seen), self.flavors)
            with self._lock:
                self._looked[host] = (use, frozenset(s.facts.uuid for s in seen))
            for s in seen:
                meta = s.facts.meta
                if meta is None or meta.scope != self.settings.scope:
                    continue  # not shoal's, or another deployment's
                if any(meta.tags.get(k) != v for k, v in tags.items()):
                    continue
                if self._foreign(meta, host):
                    continue
                with self._lock:
                    self._where[s.facts.uuid] = host
                out.append(self._as_machine(host, s, self.looker.address(host, s)))
        return out

    def reboot_machine(self, machine_id: str) -> None:
        """A hard reset of a running domain (no guest agent is needed); a domain that is
        not running is started. Idempotent. PermanentError when it does not exist."""
        with self._machine(machine_id):
            host, dom = self._existing(machine_id)
            seen = self._seen(host, dom)
            if seen.running:
                self.hosts.call(host, lambda _c: dom.reset(0))
            else:
                self._start(host, seen, clear_fault=True)

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Stop the domain, give it a new overlay of `image_id`, define it again with the
        same uuid, name and MAC (so the same address), start it. PermanentError for an
        unknown machine or image."""
        image = self.images.get(image_id)
        if image is None:
            raise PermanentError(f"image {image_id!r} does not exist")
        with self._machine(machine_id):
            host, dom = self._existing(machine_id)
            seen = self._seen(host, dom)
            meta = seen.facts.meta
            if meta is None:
                raise PermanentError(f"domain {machine_id} on {host} is not shoal's")
            flavor = self.flavors.get(meta.flavor)
            if flavor is None:
                raise PermanentError(f"machine {machine_id}: its flavor {meta.flavor} is gone")
            spec = _spec_of(seen, meta, image_id)
            new_meta = dataclasses.replace(meta, image=image_id, created=self.clock(), fault="",
                                           fault_kind=None,  # and a token an older one kept
                                           user_data=bootstrap.without_agent_token(
                                               meta.user_data))  # fmt: skip
            with self._host_locks[host]:
                self.hosts.call(host, lambda _c: _destroy(dom))
                mac = seen.facts.macs[0] if seen.facts.macs else template.mac_for(machine_id, ())
                seed_at = "/" + volumes.seed_name(machine_id)
                seed = next((p for p in seen.facts.disks if p.endswith(seed_at)), None)
                dom, made = self._define(host, spec, flavor, image, mac, new_meta, seed)
                self.looker.remember(host, made)
            self._start(host, Seen(dom, made, False))

    def close(self) -> None:
        self.hosts.close()

    # ------------------------------------------------------------------ making one
    def _create(self, spec: MachineSpec) -> tuple[str, Seen]:
        """Reserve room on a host, define the domain there (not started yet)."""
        flavor = self._flavor_of(spec)
        group = spec.placement_group.name if spec.placement_group else ""
        host = self._reserve(spec, flavor, group)
        try:
            return host, self._define_checked(host, spec, flavor, group)
        finally:
            with self._lock:
                self._pending.get(host, {}).pop(spec.machine_id, None)

    def _flavor_of(self, spec: MachineSpec) -> LibvirtFlavor:
        """The machine's size: its flavor's, or a VM's slot's."""
        if spec.vm is not None:
            return LibvirtFlavor(VM_FLAVOR, spec.vm.vcpus, spec.vm.ram_mib, spec.vm.disk_gb)
        return self.flavors[spec.flavor_id]

    def _reserve(self, spec: MachineSpec, flavor: LibvirtFlavor, group: str) -> str:
        """The host for `spec` (its zone, or the emptiest with room), with the machine's
        room reserved in this process until its domain shows in a look (so parallel
        creates never overbook between them). The lock covers only this bookkeeping:
        overlays, defines and starts run in parallel. BlockedError when none has room."""
        strict = bool(spec.placement_group and spec.placement_group.policy in STRICT)
        with self._place_lock:
            if spec.availability_zone is None:
                hosts = list(self.hosts.settings.values())
                uses = {h: self._use(h) for h in self.hosts.names}
                chosen, why = placement.choose(hosts, uses, flavor, group, strict)
                if chosen is None:  # what this process saw may be old: look again
                    uses = {h: self._use(h, fresh=True) for h in self.hosts.names}
                    chosen, why = placement.choose(hosts, uses, flavor, group, strict)
                if chosen is None:
                    raise BlockedError(f"No valid host was found: {why}", BlockedKind.NO_VALID_HOST)
                host = chosen
            else:
                host = spec.availability_zone
                self._measure(host)
                refused = self._refusal(host, flavor, group, strict, self._use(host))
                if refused is not None:
                    fresh = self._use(host, fresh=True)
                    refused = self._refusal(host, flavor, group, strict, fresh)
                if refused is not None:
                    raise BlockedError(
                        f"No valid host was found: host {host} {refused}",
                        BlockedKind.NO_VALID_HOST,
                        az=host,
                    )
            with self._lock:
                self._pending.setdefault(host, {})[spec.machine_id] = (flavor, group)
            return host

    def _refusal(
        self, host: str, flavor: LibvirtFlavor, group: str, strict: bool, use: placement.Use
    ) -> str | None:
        h = self.hosts.settings[host]
        full = placement.over(h, use.plus(flavor, group))
        if full is not None:
            return f"is full for {placement.describe(flavor)}: {full}"
        if strict and group and group in use.groups:
            return f"already holds a machine of placement group {group} (anti-affinity)"
        return None

    def _define_checked(
        self, host: str, spec: MachineSpec, flavor: LibvirtFlavor, group: str
    ) -> Seen:
        """Define the domain, then look at the host again: when someone else (another
        shoal process, another tenant) filled it meanwhile, the new machine is marked
        failed for no valid host and never started."""
        image = self.images[spec.image_id]
        mac = template.mac_for(spec.machine_id, self.looker.macs(host))
        meta = Meta(spec.tags, flavor.name, image.name, host, self.clock(), group,
                    role=spec.role,
                    user_data=bootstrap.without_agent_token(spec.user_data or ""),
                    scope=self.settings.scope)  # fmt: skip
        dom, made = self._define(host, spec, flavor, image, mac, meta)
        self.looker.remember(host, made)
        with self._lock:
            self._where[spec.machine_id] = host
        full = placement.over(self.hosts.settings[host], self._use(host, fresh=True))
        if full is not None:
            fault = f"No valid host was found: host {host} was filled meanwhile ({full})"
            meta = self._set_fault(host, dom, meta, fault, BlockedKind.NO_VALID_HOST)
            made = dataclasses.replace(made, meta=meta)
        return Seen(dom, made, False)

    def _define(
        self,
        host: str,
        spec: MachineSpec,
        flavor: LibvirtFlavor,
        image: LibvirtImage,
        mac: str,
        meta: Meta,
        seed: str | None = None,
    ) -> tuple[Any, facts.Facts]:
        """The overlay and the domain, defined; the domain's facts from the XML sent.
        `seed`: a NoCloud seed already in the pool (a rebuild keeps the one made with the
        machine, whose user data has the agent token the metadata does not keep)."""
        pool = self.settings.pool
        disk = None
        if image.disk:
            make = partial(volumes.make_overlay, pool_name=pool, host=host,
                           machine_id=spec.machine_id, image=image.name, base=image.disk,
                           disk_gb=flavor.disk_gb)  # fmt: skip
            disk = self.hosts.call(host, make)
        try:
            if image.kernel:
                seed = None
            elif seed is None and spec.user_data:  # a disk image: a NoCloud seed ISO
                data = nocloud.nocloud_iso(spec.machine_id, spec.name, spec.user_data)
                upload = partial(volumes.upload_seed, pool_name=pool, host=host,
                                 machine_id=spec.machine_id, data=data)  # fmt: skip
                seed = self.hosts.call(host, upload)
            d = template.Domain(host, flavor, image, mac, disk, meta.xml(), seed)
            chosen = spec.vm.template if spec.vm and spec.vm.template else self.template
            xml = template.render(chosen, self.settings, spec, d)
            return self.hosts.call(host, lambda c: c.defineXML(xml)), facts.parse(xml)
        except BaseException:
            with contextlib.suppress(Exception):  # the overlay or seed made before it failed
                self.hosts.call(host, lambda c: volumes.delete_all(c, pool, spec.machine_id))
            raise

    def _start(self, host: str, seen: Seen, clear_fault: bool = False) -> Seen:
        """Start the domain; a start that fails leaves it defined, its fault recorded.
        The domain as it is then."""
        meta = seen.facts.meta
        assert meta is not None
        if clear_fault and meta.fault:
            meta = self._set_fault(host, seen.dom, meta, "", None)

        def go(_conn: Any) -> Exception | None:
            try:
                seen.dom.create()
            except Exception as exc:
                c = errors.code(exc)
                if c == OPERATION_INVALID:  # already running
                    return None
                if not c or errors.is_connection_error(exc):
                    raise
                return exc
            return None

        failed = self.hosts.call(host, go)
        if failed is None:
            return Seen(seen.dom, dataclasses.replace(seen.facts, meta=meta), True)
        fault, no_room = errors.start_fault(failed, host)
        kind = BlockedKind.NO_VALID_HOST if no_room else None
        meta = self._set_fault(host, seen.dom, meta, fault, kind)
        return Seen(seen.dom, dataclasses.replace(seen.facts, meta=meta), False)

    def _set_fault(
        self, host: str, dom: Any, meta: Meta, fault: str, kind: BlockedKind | None
    ) -> Meta:
        new = dataclasses.replace(meta, fault=fault, fault_kind=kind)
        xml = new.xml(namespaced=False)
        self.hosts.call(
            host, lambda _c: dom.setMetadata(METADATA_ELEMENT, xml, "shoal", XMLNS, AFFECT_CONFIG)
        )
        return new

    # ------------------------------------------------------------------ looking
    def _use(self, host: str, fresh: bool = False) -> placement.Use:
        """What is placed on `host`: as last looked at (or, `fresh` or never looked at,
        now), plus what this process has reserved there and not yet seen defined."""
        looked = None if fresh else self._looked.get(host)
        if looked is None:
            seen = self.looker.look(host, exact=False)
            use = placement.use_of(((s.facts, s.running) for s in seen), self.flavors)
            looked = (use, frozenset(s.facts.uuid for s in seen))
            with self._lock:
                self._looked[host] = looked
        use, ids = looked
        with self._lock:
            pending = list(self._pending.get(host, {}).items())
        for mid, (flavor, group) in pending:
            if mid not in ids:
                use = use.plus(flavor, group)
        return use

    def _seen(self, host: str, dom: Any) -> Seen:
        def go(_conn: Any) -> Seen:
            return Seen(dom, facts.parse(dom.XMLDesc(0)), int(dom.ID()) != -1)

        return self.hosts.call(host, go)

    def _find(self, machine_id: str, prefer: str | None) -> tuple[str, Any] | None:
        """The host and domain of `machine_id`, asking the host it was last seen on and
        `prefer` first, then the others (one lookup each). An id that is not a UUID
        names no domain."""
        try:
            uuid.UUID(machine_id)
        except ValueError:
            return None
        first = [h for h in (self._where.get(machine_id), prefer) if h in self.hosts.settings]
        order = list(dict.fromkeys([*first, *self._host_names()]))
        for host in order:
            try:
                dom = self.hosts.call(
                    host, lambda c: c.lookupByUUIDString(machine_id), keep=(errors.NO_DOMAIN,)
                )
            except Exception as exc:
                if errors.code(exc) == errors.NO_DOMAIN:
                    continue
                raise
            return host, dom
        return None

    def _existing(self, machine_id: str) -> tuple[str, Any]:
        found = self._find(machine_id, None)
        if found is None:
            raise PermanentError(f"machine {machine_id} does not exist on any libvirt host")
        return found

    def _as_machine(self, host: str, s: Seen, address: str | None) -> Machine:
        meta = s.facts.meta
        assert meta is not None
        fault: str | None = meta.fault or None
        if fault:
            state = MachineState.ERROR
        elif s.running:
            state = MachineState.ACTIVE if address else MachineState.BUILDING
        elif self.clock() - meta.created < START_GRACE_S:
            state = MachineState.BUILDING
        else:
            state, fault = MachineState.ERROR, f"the domain is shut off on libvirt host {host}"
        return Machine(
            machine_id=s.facts.uuid,
            name=s.facts.name,
            state=state,
            tags=dict(meta.tags),
            availability_zone=meta.host or host,
            address=address,
            provider_id=f"{host}/{s.facts.name}",
            fault=fault,
            image_id=meta.image,
            flavor_id=meta.flavor,
            fault_kind=meta.fault_kind if meta.fault else None,
        )

    @contextlib.contextmanager
    def _machine(self, machine_id: str) -> Iterator[None]:
        """One call at a time per machine in this process (a delete racing its create)."""
        with self._lock:
            lock = self._machine_locks.setdefault(machine_id, threading.Lock())
        with lock:
            yield


def _destroy(dom: Any) -> None:
    try:
        dom.destroy()
    except Exception as exc:
        if errors.code(exc) not in (OPERATION_INVALID, errors.NO_DOMAIN):  # not running
            raise


def _destroy_and_undefine(dom: Any) -> None:
    _destroy(dom)
    try:
        dom.undefine()
    except Exception as exc:
        if errors.code(exc) != errors.NO_DOMAIN:
            raise


def _spec_of(seen: Seen, meta: Meta, image_id: str) -> MachineSpec:
    """The spec a rebuilt domain is rendered from: what its metadata kept."""
    from shoal.drivers import contract

    t = meta.tags
    return MachineSpec(
        machine_id=seen.facts.uuid,
        name=seen.facts.name,
        project_id=t.get(contract.TAG_PROJECT, ""),
        cluster_id=t.get(contract.TAG_CLUSTER, ""),
        nodegroup_id=t.get(contract.TAG_NODEGROUP, ""),
        role=meta.role,
        flavor_id=meta.flavor,
        image_id=image_id,
        availability_zone=meta.host,
        user_data=meta.user_data or None,
    )
