"""What a create sends to Nova for a `MachineSpec`, and what in a spec this driver
cannot do (checked by `validate`, with no remote I/O).

Passed through: name, flavor, image, zone, keypair, networks (ids, or names looked
up once), security groups (by name), user data (base64), the server group of the
spec's placement group, Nova tags and metadata (servers.py), and the provider
options below. Not done: boot from volume and Magnum's docker volume, which need
Cinder; the driver refuses them in `validate` rather than boot without them.
"""

from __future__ import annotations

import base64
import re
import threading
from typing import Any

from openstack import exceptions as sdk_exceptions
from openstack.connection import Connection

from shoal.drivers.contract import MachineSpec, PermanentError

# Provider options a node group may set (`provider_options`), with what each does.
OPTIONS = {
    "config_drive": "true|false: attach a config drive (metadata without a metadata service)",
}
USER_DATA_MAX = 65535  # bytes of base64, Nova's limit
UUID = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")
TRUE, FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def problems(spec: MachineSpec) -> list[str]:
    """What in `spec` this driver cannot do, each in a sentence that says what to change."""
    out = []
    if spec.boot_volume_size:
        out.append(
            f"boot_volume_size is {spec.boot_volume_size} GB, but the openstack driver does not "
            "boot from volumes yet (it needs Cinder, which it has not been tested with): boot "
            "from the image by removing boot_volume_size (or the label boot_volume_size)"
        )
    if spec.docker_volume_size:
        out.append(
            f"docker_volume_size is {spec.docker_volume_size} GB, but the openstack driver does "
            "not attach volumes yet (it needs Cinder): remove docker_volume_size"
        )
    for key, value in sorted(spec.options.items()):
        if key not in OPTIONS:
            known = ", ".join(f"{k} ({v})" for k, v in OPTIONS.items())
            out.append(f"option {key!r} is not an option of the openstack driver ({known})")
        elif key == "config_drive" and str(value).lower() not in TRUE + FALSE:
            out.append(f"option config_drive={value!r}: true or false")
    if spec.user_data and len(_b64(spec.user_data)) > USER_DATA_MAX:
        out.append(
            f"the node's user data takes {len(_b64(spec.user_data))} bytes in base64, more than "
            f"Nova's {USER_DATA_MAX}"
        )
    return out


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Networks:
    """Network names looked up once (ids are used as they are)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()

    def request(self, conn: Connection, refs: tuple[str, ...]) -> list[dict[str, str]] | str:
        """Nova's `networks` for `refs` ("auto" when there are none). PermanentError for
        a name no network has."""
        if not refs:
            return "auto"
        return [{"uuid": self._id(conn, ref)} for ref in refs]

    def _id(self, conn: Connection, ref: str) -> str:
        if UUID.match(ref):
            return ref
        with self._lock:
            if ref in self._ids:
                return self._ids[ref]
        try:
            found = conn.network.find_network(ref, ignore_missing=False)
        except sdk_exceptions.NotFoundException as exc:
            raise PermanentError(f"network {ref!r} does not exist in the cloud") from exc
        with self._lock:
            self._ids[ref] = str(found.id)
        return str(found.id)


def create_body(
    spec: MachineSpec,
    *,
    flavor_id: str,
    image_id: str,
    networks: list[dict[str, str]] | str,
    tags: list[str],
    metadata: dict[str, str],
    server_group: str | None,
) -> dict[str, Any]:
    """The body of `POST /servers` for `spec`."""
    server: dict[str, Any] = {
        "name": spec.name,
        "flavorRef": flavor_id,
        "imageRef": image_id,
        "networks": networks,
        "tags": tags,
        "metadata": metadata,
    }
    if spec.availability_zone:
        server["availability_zone"] = spec.availability_zone
    if spec.keypair:
        server["key_name"] = spec.keypair
    if spec.user_data:
        server["user_data"] = _b64(spec.user_data)
    if spec.security_groups:
        server["security_groups"] = [{"name": name} for name in spec.security_groups]
    if str(spec.options.get("config_drive", "")).lower() in TRUE:
        server["config_drive"] = True
    body: dict[str, Any] = {"server": server}
    if server_group is not None:
        body["os:scheduler_hints"] = {"group": server_group}
    return body
