"""A cloud-init NoCloud seed for images that boot from their disk: a small ISO 9660 image
labelled `cidata` holding `meta-data` (instance id, hostname) and `user-data`, which
cloud-init finds as a CD-ROM at first boot. Built in memory with pycdlib (pure Python,
part of the `libvirt` extra): Joliet and Rock Ridge names, so the guest sees the file
names cloud-init looks for."""

from __future__ import annotations

import io

from shoal.drivers.contract import PermanentError

LABEL = "cidata"


def meta_data(instance_id: str, hostname: str) -> str:
    return f"instance-id: {instance_id}\nlocal-hostname: {hostname}\n"


def nocloud_iso(instance_id: str, hostname: str, user_data: str) -> bytes:
    """The seed ISO's bytes. PermanentError when pycdlib is not installed."""
    try:
        import pycdlib
    except ImportError as exc:
        raise PermanentError(
            f"pycdlib is not installed ({exc}): install shoal's `libvirt` extra to give "
            "disk images their user data"
        ) from exc
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=LABEL)
    files = (("meta-data", meta_data(instance_id, hostname)), ("user-data", user_data))
    for name, text in files:
        data = text.encode()
        iso_name = "/" + name.upper().replace("-", "_") + ".;1"
        iso.add_fp(io.BytesIO(data), len(data), iso_name, rr_name=name, joliet_path="/" + name)
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()
