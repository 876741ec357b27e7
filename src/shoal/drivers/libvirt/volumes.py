"""Each machine's disk: a copy-on-write qcow2 overlay on its image's base disk, a
volume of the provider's storage pool (libvirt makes it with qemu-img, on the host,
remote or not), named after the machine id and deleted with the domain."""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from typing import Any
from xml.sax.saxutils import escape

from shoal.drivers.contract import PermanentError
from shoal.drivers.libvirt import errors

GB = 1000**3


def overlay_name(machine_id: str) -> str:
    return f"{machine_id}.qcow2"


def seed_name(machine_id: str) -> str:
    return f"{machine_id}-seed.iso"


def names(machine_id: str) -> tuple[str, ...]:
    """Every volume a machine may own."""
    return (overlay_name(machine_id), seed_name(machine_id))


def _pool(conn: Any, pool: str, host: str) -> Any:
    try:
        return conn.storagePoolLookupByName(pool)
    except Exception as exc:
        if errors.code(exc) == 49:  # VIR_ERR_NO_STORAGE_POOL
            raise PermanentError(
                f"libvirt host {host} has no storage pool {pool!r} (the provider's `pool`)"
            ) from exc
        raise


def _lookup(pool: Any, name: str) -> Any | None:
    try:
        return pool.storageVolLookupByName(name)
    except Exception as exc:
        if errors.code(exc) != errors.NO_STORAGE_VOL:
            raise
        return None


def make_overlay(
    conn: Any, pool_name: str, host: str, machine_id: str, image: str, base: str, disk_gb: int
) -> str:
    """A new overlay of volume `base` for the machine (one left by an earlier attempt is
    replaced); its path on the host. PermanentError when the base is not in the pool."""
    pool = _pool(conn, pool_name, host)
    base_vol = _lookup(pool, base)
    if base_vol is None:
        pool.refresh(0)  # a base disk copied into the pool's directory by hand
        base_vol = _lookup(pool, base)
    if base_vol is None:
        raise PermanentError(
            f"image {image}: its base disk {base!r} is not in storage pool {pool_name!r} "
            f"on libvirt host {host}"
        )
    info = ET.fromstring(base_vol.XMLDesc(0))
    fmt = info.find("target/format")
    base_format = (fmt.get("type") if fmt is not None else None) or "raw"
    capacity = max(int(info.findtext("capacity") or 0), disk_gb * GB)
    old = _lookup(pool, overlay_name(machine_id))
    if old is not None:
        old.delete(0)
    xml = (
        f"<volume><name>{escape(overlay_name(machine_id))}</name>"
        f"<capacity unit='bytes'>{capacity}</capacity>"
        "<target><format type='qcow2'/></target>"
        f"<backingStore><path>{escape(base_vol.path())}</path>"
        f"<format type='{escape(base_format)}'/></backingStore></volume>"
    )
    return str(pool.createXML(xml, 0).path())


def upload_seed(conn: Any, pool_name: str, host: str, machine_id: str, data: bytes) -> str:
    """The machine's NoCloud seed ISO as a volume of the pool (uploaded over the libvirt
    connection, so a remote host gets it too); its path on the host."""
    pool = _pool(conn, pool_name, host)
    old = _lookup(pool, seed_name(machine_id))
    if old is not None:
        old.delete(0)
    xml = (
        f"<volume><name>{escape(seed_name(machine_id))}</name>"
        f"<capacity unit='bytes'>{len(data)}</capacity>"
        "<target><format type='raw'/></target></volume>"
    )
    vol = pool.createXML(xml, 0)
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, len(data), 0)
        for at in range(0, len(data), 256 * 1024):
            stream.send(data[at : at + 256 * 1024])
        stream.finish()
    except BaseException:
        with contextlib.suppress(Exception):
            stream.abort()
        with contextlib.suppress(Exception):
            vol.delete(0)
        raise
    return str(vol.path())


def delete_all(conn: Any, pool: str, machine_id: str) -> int:
    """Delete the machine's volumes; how many there were. A missing pool or volume is
    nothing to delete."""
    try:
        found = conn.storagePoolLookupByName(pool)
    except Exception as exc:
        if errors.code(exc) == 49:
            return 0
        raise
    gone = 0
    for name in names(machine_id):
        vol = _lookup(found, name)
        if vol is not None:
            try:
                vol.delete(0)
            except Exception as exc:
                if errors.code(exc) != errors.NO_STORAGE_VOL:
                    raise
            gone += 1
    return gone
