"""What the cloud offers: availability zones, flavors and images, cached.

A zone whose hosts are all disabled is still a zone (Nova lists it, not available):
it is known to `validate`, and a create there is refused as "no valid host" for that
zone, so the conductor places the node in another one rather than failing the group.

`validate` must not call the cloud, so it reads the last `Catalog` loaded (by the
conductor's provider check, or by a create when the cache is older than the
provider's `catalog_refresh_seconds`). Until one is loaded, `validate` has no
opinion about names, and a create checks them against the cloud itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from openstack.connection import Connection

from shoal.drivers.contract import FlavorSize


@dataclass(frozen=True)
class Catalog:
    """One look at the cloud's zones, flavors and images. Flavors and images are
    found by name or by id; a name that several images share finds none."""

    zones: tuple[str, ...] = ()  # every zone, available or not
    down: frozenset[str] = frozenset()  # zones Nova says are not available now
    flavors: Mapping[str, str] = field(default_factory=dict)  # name or id -> id
    flavor_names: tuple[str, ...] = ()
    flavor_sizes: Mapping[str, FlavorSize] = field(default_factory=dict)  # by name
    images: Mapping[str, str | None] = field(default_factory=dict)  # name or id -> id
    image_names: tuple[str, ...] = ()
    loaded_at: float | None = None  # time.monotonic() of the look; None: never looked

    @property
    def loaded(self) -> bool:
        return self.loaded_at is not None

    def age(self) -> float:
        return float("inf") if self.loaded_at is None else time.monotonic() - self.loaded_at

    def flavor(self, ref: str) -> str | None:
        return self.flavors.get(ref)

    def image(self, ref: str) -> str | None:
        return self.images.get(ref)

    def problems(self, flavor: str, image: str, zone: str | None) -> list[str]:
        """What is unknown among `flavor`, `image` and `zone`, each in a sentence that
        lists what exists ([] when the catalog was never loaded: no opinion yet)."""
        if not self.loaded:
            return []
        out = []
        if flavor not in self.flavors:
            known = ", ".join(self.flavor_names) or "none"
            out.append(f"flavor {flavor!r} does not exist in the cloud (flavors: {known})")
        if image not in self.images:
            known = ", ".join(self.image_names) or "none"
            out.append(f"image {image!r} does not exist in the cloud (active images: {known})")
        elif self.images[image] is None:
            out.append(f"image name {image!r} names several images in the cloud: give its id")
        if zone is not None and zone not in self.zones:
            known = ", ".join(self.zones) or "none"
            out.append(f"availability zone {zone!r} does not exist (zones: {known})")
        return out


def load(conn: Connection) -> Catalog:
    """The cloud's zones (and which are not available), its flavors and its active
    images now (three listings). Raises what the SDK raises; the caller maps it."""
    listed = list(conn.compute.availability_zones())
    zones = tuple(sorted(z.name for z in listed))
    down = frozenset(z.name for z in listed if not _available(z.state))
    flavors: dict[str, str] = {}
    sizes: dict[str, FlavorSize] = {}
    for f in conn.compute.flavors(details=True):
        flavors[f.id] = f.id
        flavors.setdefault(f.name, f.id)
        sizes.setdefault(f.name, FlavorSize(int(f.vcpus or 0), int(f.ram or 0), int(f.disk or 0)))
    images: dict[str, str | None] = {}
    names: dict[str, list[str]] = {}
    for i in conn.image.images():
        if i.status != "active":
            continue
        images[i.id] = i.id
        if i.name:
            names.setdefault(i.name, []).append(i.id)
    for name, ids in names.items():
        images.setdefault(name, ids[0] if len(ids) == 1 else None)
    flavor_names = tuple(sorted(k for k, v in flavors.items() if k != v))
    return Catalog(
        zones=zones,
        down=down,
        flavors=flavors,
        flavor_names=flavor_names,
        flavor_sizes=sizes,
        images=images,
        image_names=tuple(sorted(names)),
        loaded_at=time.monotonic(),
    )


def _available(state: object) -> bool:
    return isinstance(state, Mapping) and bool(state.get("available"))
