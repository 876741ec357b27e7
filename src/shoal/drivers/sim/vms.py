"""VMs on virt hosts, in the sim (mixed into SimWorld): a hosted sim provider's
machines (`hosted.py`). A VM is a server row like any other (its zone is its
host's name, its flavor "vm", its size its slot's), plus a `sim_vms` row naming
the host server it runs on and keeping the domain XML it was given. A host has
the cores and memory of its own server; a VM that does not fit is refused for
that host (no valid host), and the VMs of a host that is gone, or not running,
fail ("its host is down"), as on a real hypervisor.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    MachineSpec,
    MachineState,
    PermanentError,
)
from shoal.drivers.sim import catalog, tables
from shoal.drivers.sim.faults import jittered
from shoal.drivers.sim.servers import ADD_USER_DATA, FORGET_USER_DATA, ROW, SimServer, view
from shoal.drivers.sim.store import WorldStore

_S, _V = tables.servers, tables.vms
VM_FLAVOR = "vm"  # a VM's flavor column: it counts against its host, not a quota
HOST_DOWN = "the virt host {host} this VM runs on is down"


class VmOps(WorldStore):
    """Operations on the VMs of virt hosts."""

    def create_vm(self, spec: MachineSpec, host_id: str, xml: str) -> SimServer:
        """The VM `spec.machine_id` on host server `host_id` (idempotent). Blocked when
        the host has no room for it; Permanent for an unknown image or a host that is
        not a server of this world."""
        vm = spec.vm
        if vm is None:
            raise PermanentError("a VM needs its shape (spec.vm)")
        if spec.image_id not in catalog.IMAGES:
            raise PermanentError(f"image {spec.image_id!r} does not exist in the sim cloud")
        with self._txn(write=True) as conn:
            out = self._create_vm(conn, spec, host_id, xml)
        if isinstance(out, Exception):
            raise out
        return out

    def _create_vm(
        self, conn: Connection, spec: MachineSpec, host_id: str, xml: str
    ) -> SimServer | Exception:
        vm = spec.vm
        assert vm is not None
        cfg = self._load(conn).config
        now = cfg.sim_now(self._clock.now())
        row = conn.execute(select(*ROW).where(_S.c.machine_id == spec.machine_id)).first()
        if row is not None and (found := view(row, now)) is not None:
            return found
        if row is not None:  # gone: the id is free
            conn.execute(delete(_S).where(_S.c.seq == row.seq))
            conn.execute(FORGET_USER_DATA, {"mid": spec.machine_id})
        host = conn.execute(select(*ROW).where(_S.c.machine_id == host_id)).first()
        seen = view(host, now) if host is not None else None
        zone = spec.availability_zone or ""
        if seen is None:
            return PermanentError(f"virt host {zone} ({host_id}) is not a server of this sim cloud")
        if seen.state is not MachineState.ACTIVE:
            return BlockedError(
                f"No valid host was found: virt host {zone} is {seen.state}",
                BlockedKind.NO_VALID_HOST,
                az=zone,
            )
        assert host is not None
        cores, ram = self._placed(conn, host_id, now)
        if cores + vm.vcpus > host.vcpus or ram + vm.ram_mib > host.ram_mb:
            return BlockedError(
                f"No valid host was found: virt host {zone} is full for a VM of {vm.vcpus} "
                f"cores and {vm.ram_mib} MiB ({cores} of {host.vcpus} cores and {ram} of "
                f"{host.ram_mb} MiB placed)",
                BlockedKind.NO_VALID_HOST,
                az=zone,
            )
        boot = jittered(cfg.boot_seconds, cfg.jitter, cfg.seed, spec.machine_id, "boot")
        values: dict[str, Any] = dict(
            machine_id=spec.machine_id, name=spec.name, project=spec.project_id,
            cluster=spec.cluster_id, nodegroup=spec.nodegroup_id, node=spec.machine_id,
            role=spec.role, flavor=VM_FLAVOR, image=spec.image_id, az=zone, vcpus=vm.vcpus,
            ram_mb=vm.ram_mib,
            created_at=now, ready_at=now + boot, up_at=now + boot, fault=None,
            deleting_at=None, gone_at=None, delete_failures=0,
        )  # fmt: skip
        pk = conn.execute(insert(_S).values(values)).inserted_primary_key
        assert pk is not None
        conn.execute(delete(_V).where(_V.c.machine_id == spec.machine_id))
        conn.execute(insert(_V).values(machine_id=spec.machine_id, host=host_id, xml=xml))
        if spec.user_data:
            conn.execute(
                ADD_USER_DATA, {"machine_id": spec.machine_id, "user_data": spec.user_data}
            )
        made = view([pk[0] if c.name == "seq" else values[c.name] for c in ROW], now)
        assert made is not None
        return made

    def _placed(self, conn: Connection, host_id: str, now: float) -> tuple[int, int]:
        """Cores and MiB of the VMs on a host (those not gone)."""
        q = (
            select(func.coalesce(func.sum(_S.c.vcpus), 0), func.coalesce(func.sum(_S.c.ram_mb), 0))
            .select_from(_S.join(_V, _V.c.machine_id == _S.c.machine_id))
            .where(_V.c.host == host_id)
            .where((_S.c.gone_at.is_(None)) | (_S.c.gone_at > now))
        )
        cores, ram = conn.execute(q).one()
        return int(cores), int(ram)

    def fail_vms_of_down_hosts(self) -> int:
        """Fail every running VM whose host server is gone or not ACTIVE (what a person
        would see: the VM stops answering); how many were failed now."""
        with self._txn(write=True) as conn:
            now = self._load(conn).config.sim_now(self._clock.now())
            pairs = conn.execute(
                select(_V.c.machine_id, _V.c.host).join(_S, _S.c.machine_id == _V.c.machine_id)
                .where(_S.c.deleting_at.is_(None), _S.c.fault.is_(None))
            ).all()  # fmt: skip
            hosts = {h for _, h in pairs}
            rows = conn.execute(select(*ROW).where(_S.c.machine_id.in_(hosts))).all()
            up = {}
            for r in rows:
                seen = view(r, now)
                if seen is not None:
                    up[seen.machine_id] = seen
            failed = 0
            for mid, host in pairs:
                h = up.get(host)
                if h is not None and h.state is MachineState.ACTIVE:
                    continue
                name = h.name if h is not None else host
                conn.execute(
                    update(_S)
                    .where(_S.c.machine_id == mid)
                    .values(fault=HOST_DOWN.format(host=name), ready_at=now)
                )
                failed += 1
            return failed

    def domain_xml(self, machine_id: str) -> str | None:
        """The domain XML VM `machine_id` was made with (admin: no latency)."""
        with self._txn(write=False) as conn:
            return conn.scalar(select(_V.c.xml).where(_V.c.machine_id == machine_id))

    def vms_on(self, host_id: str) -> list[str]:
        """The machine ids of the VMs on host server `host_id` not deleted (admin)."""
        with self._txn(write=False) as conn:
            rows = conn.execute(
                select(_V.c.machine_id).join(_S, _S.c.machine_id == _V.c.machine_id)
                .where(_V.c.host == host_id, _S.c.deleting_at.is_(None))
            ).all()  # fmt: skip
        return [r[0] for r in rows]
