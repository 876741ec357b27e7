"""The heat driver: each node group is one Heat stack (docs/drivers.md, "The heat driver").

`apply_group` makes a group's stack hold exactly the members it is sent: it creates the
stack (named from the deployment and the node group's id, so a conductor that crashed
at any moment finds it again and never makes a second one) or updates it with a PATCH
that sends only new parameters; a removed member's index goes in `removal_policies`,
so exactly its server goes. `list_machines` reads the stacks' parameters (who the
members are) and Nova's servers (how they are): two calls for a group. The per-machine
calls are that on a group of one more or one less member. New members' Nova server
groups come first from the cluster's stack (cluster_stack.py), which `release_cluster`
deletes.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.drivers.contract import (
    TAG_NODE,
    TAG_NODEGROUP,
    BlockedError,
    BlockedKind,
    Capabilities,
    Feature,
    GroupReport,
    GroupRequest,
    GroupState,
    Machine,
    MachineSpec,
    MachineState,
    PermanentError,
    TransientError,
)
from shoal.drivers.heat import cluster_stack as cs
from shoal.drivers.heat import members as mb
from shoal.drivers.heat import templates
from shoal.drivers.heat.cloud import Cloud
from shoal.drivers.heat.servers import ServerReads
from shoal.drivers.heat.settings import HeatSettings

log = logging.getLogger(__name__)
FEATURES = frozenset(
    {Feature.PER_GROUP, Feature.RELEASE, Feature.RELEASE_EARLY, Feature.REBOOT, Feature.REBUILD}
)
PACE_S = 2.0  # a stack update takes seconds at least (Capabilities.pace_seconds)
# The node group options this driver knows (`provider_options`), with what each does.
OPTIONS = {
    templates.OPTION: "the operator's template the group's stack is made from, by name "
    "(settings `templates`; 'default': the provider's `template`, else the built-in one)",
}
# Labels read as options when a group's own provider_options do not set them: a
# cluster template's label reaches its clusters' groups (domain/provider_options.py).
LABELS = {templates.LABEL: templates.OPTION}


@dataclass(frozen=True)
class Catalog:
    zones: tuple[str, ...] = ()
    flavors: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # name or id -> flavor
    images: Mapping[str, str] = field(default_factory=dict)  # name or id -> id
    loaded_at: float | None = None


class HeatDriver:
    name = "heat"

    def __init__(self, settings: HeatSettings, cloud: Cloud) -> None:
        self.settings = settings
        self.cloud = cloud
        assert settings.deployment is not None
        self.deployment: str = settings.deployment
        # Every template a group may choose, by name, checked (settings.problems said why not).
        self.group_templates: dict[str, dict[str, Any]] = {
            name: templates.load_operator(path) if path else templates.GROUP
            for name, path in settings.template_paths().items()
        }
        self._catalog = Catalog()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self.clusters = cs.ClusterStacks(cloud, self.deployment, self._lock)
        self.servers = ServerReads(lambda query: self.cloud.servers(query))

    # ------------------------------------------------------------ facts
    def capabilities(self) -> Capabilities:
        c = self._catalog
        return Capabilities(
            availability_zones=c.zones,
            flavors=tuple(c.flavors),
            images=tuple(c.images),
            features=FEATURES,
            pace_seconds=PACE_S,
            option_choices={templates.OPTION: tuple(self.group_templates)},
            option_labels=LABELS,
        )

    def check(self) -> Capabilities:
        self.cloud.stacks([self._dep_tag()])  # Heat answers, and takes our credentials
        self._load_catalog()
        return self.capabilities()

    def validate(self, spec: MachineSpec) -> list[str]:
        out = [
            f"option {k!r} is not known to the heat driver (options: {', '.join(OPTIONS)})"
            for k in spec.options
            if k not in OPTIONS
        ]
        why = templates.unknown(templates.chosen(spec.options), tuple(self.group_templates))
        out += [why] if why else []
        c = self._catalog
        if c.loaded_at is None:
            return out
        if spec.flavor_id not in c.flavors:
            out.append(f"flavor {spec.flavor_id!r} does not exist in the cloud")
        if spec.image_id not in c.images:
            out.append(f"image {spec.image_id!r} does not exist in the cloud")
        if spec.availability_zone and spec.availability_zone not in c.zones:
            known = ", ".join(c.zones) or "none"
            out.append(
                f"availability zone {spec.availability_zone!r} does not exist (zones: {known})"
            )
        return out

    # ------------------------------------------------------------ per group
    def apply_group(self, request: GroupRequest) -> None:
        name = mb.stack_name(self.deployment, request.nodegroup_id)
        with self._lock(name):
            self._apply(name, request)

    def _apply(self, name: str, request: GroupRequest) -> None:
        self._refresh_catalog()
        for spec in request.members:
            problems = [p for p in self.validate(spec) if not p.startswith("option")]
            if problems:
                raise PermanentError(f"node {spec.name}: " + "; ".join(problems))
        chosen = templates.chosen(request.options)
        why = templates.unknown(chosen, tuple(self.group_templates))
        if why:
            raise PermanentError(why)
        stack = self.cloud.stack(name)
        if stack is not None and stack["stack_status"] == "DELETE_IN_PROGRESS":
            raise TransientError(f"the stack {name} is being deleted; the group is made anew then")
        made = templates.made_from(stack.get("tags")) if stack is not None else chosen
        if made != chosen:  # Heat would replace what the templates make differently
            raise PermanentError(
                f"the group's stack {name} was made from template {made!r}; it asks for "
                f"{chosen!r}, and a group's template does not change: make a new node group "
                f"with template {chosen!r}, or choose {made!r} again"
            )
        wanted = [
            mb.entry(s, self.deployment, self.settings.networks, self._ids(s))
            for s in request.members
        ]
        current = mb.Group.of(stack.get("parameters") if stack else None)
        planned = mb.plan(current, wanted)
        update = planned or mb.unchanged(current)
        # A failure naming server groups Nova does not have (deleted outside shoal): the
        # cluster stack replaces them, and the members Nova refused are sent again.
        gone: frozenset[str] = frozenset()
        if stack is not None and str(stack.get("stack_status") or "").endswith("FAILED"):
            gone = cs.gone_of(str(stack.get("stack_status_reason") or ""))
        retry = cs.retried(update.members, gone, self._with_server(request)) if gone else []
        if planned is None and stack is not None and not retry:
            return  # (the server group is replaced when the group next changes)
        again = [e for e in update.members.values() if e.get("id") in set(retry)]
        self._check_quota([*update.added, *again])
        asked = cs.asked_by([*update.added, *again], request.members)  # server groups first
        ids = self.clusters.server_groups(request.cluster_id, asked, gone)
        update = cs.hinted(update, request.members, ids, retry)
        sent = [*update.added, *(e for e in update.members.values() if e.get("id") in retry)]
        if stack is None:
            self.cloud.create_stack(self._create_body(name, request, update, chosen))
        else:
            extra = cs.group_parameter(stack.get("parameters") or {}, sent)
            self.cloud.patch_stack(
                name, stack["id"], {**update.parameters(), **extra}, _files(update)
            )
        self._wrote(request.nodegroup_id)

    def _ids(self, spec: MachineSpec) -> dict[str, str]:
        """The cloud's ids of the image and flavor `spec` names (by name or id), as the
        catalog knows them; what it does not know is left as named."""
        c = self._catalog
        ids = {
            "image_id": c.images.get(spec.image_id),
            "flavor_id": (c.flavors.get(spec.flavor_id) or {}).get("id"),
        }
        return {k: str(v) for k, v in ids.items() if v}

    def _with_server(self, request: GroupRequest) -> set[str]:
        """The group's members that have a server in Nova (machine ids): one call."""
        tags = [self._dep_tag(), mb.nova_tag(TAG_NODEGROUP, request.nodegroup_id)]
        metas = [s.get("metadata") or {} for s in self.cloud.servers(tags)]
        return {str(m[TAG_NODE]) for m in metas if m.get(TAG_NODE)}

    def _create_body(
        self, name: str, request: GroupRequest, update: mb.Update, chosen: str
    ) -> dict[str, Any]:
        template = self.group_templates[chosen]
        tags = [
            mb.nova_tag(mb.TAG_DEPLOYMENT, self.deployment),
            mb.nova_tag("shoal-cluster", request.cluster_id),
            mb.nova_tag(TAG_NODEGROUP, request.nodegroup_id),
            mb.nova_tag(templates.TAG, chosen),
        ]
        return {
            "stack_name": name,
            "template": template,
            "files": _files(update),
            "environment": {"resource_registry": {templates.MEMBERS_TYPE: templates.MEMBERS_FILE}},
            "parameters": {
                **update.parameters(),
                **cs.group_parameter(template.get("parameters") or {}, update.added),
            },
            "tags": ",".join(tags),
            "disable_rollback": True,
        }

    def release_cluster(self, project_id: str, cluster_id: str) -> None:
        """Delete the cluster's cluster stack (its server groups) once its group stacks
        are gone (cluster_stack.py). TransientError only."""
        self.clusters.release(cluster_id)

    def begin_release(self, project_id: str, cluster_id: str) -> None:
        """The cluster is being deleted: its cluster stack goes beside its group stacks
        (cluster_stack.py). TransientError only."""
        self.clusters.begin_release(cluster_id)

    def delete_group(self, nodegroup_id: str) -> None:
        name = mb.stack_name(self.deployment, nodegroup_id)
        with self._lock(name):
            stack = self.cloud.stack(name)
            if stack is None or stack["stack_status"] == "DELETE_IN_PROGRESS":
                return
            self.cloud.delete_stack(name, stack["id"])
            self._wrote(nodegroup_id)

    # ------------------------------------------------------------ per machine
    def ensure_machine(self, spec: MachineSpec) -> Machine:
        name = mb.stack_name(self.deployment, spec.nodegroup_id)
        with self._lock(name):
            stack = self.cloud.stack(name)
            group = mb.Group.of(stack.get("parameters") if stack else None)
            if group.index_of(spec.machine_id) is None:
                specs = [*(_spec_of(e, spec) for e in group.members.values()), spec]
                self._apply(name, GroupRequest(spec.nodegroup_id, spec.project_id,
                                               spec.cluster_id, tuple(specs),
                                               spec.options))  # fmt: skip
        found = self.list_machines({TAG_NODE: spec.machine_id})
        if found:
            return found[0]
        return Machine(spec.machine_id, spec.name, MachineState.BUILDING, spec.tags,
                       spec.availability_zone, image_id=spec.image_id,
                       flavor_id=spec.flavor_id)  # fmt: skip

    def delete_machine(self, machine_id: str) -> None:
        servers = self.cloud.servers([self._dep_tag(), mb.nova_tag(TAG_NODE, machine_id)])
        for server in servers:
            group = (server.get("metadata") or {}).get(TAG_NODEGROUP)
            if group:
                if not self._remove(group, machine_id):  # its stack is gone
                    self._delete_unheld(group, servers)
                return
        for stack in self.cloud.stacks([self._dep_tag()]):
            if cs.is_cluster_stack(self.deployment, stack["stack_name"]):
                continue
            full = self.cloud.stack(stack["stack_name"])
            if full and mb.Group.of(full.get("parameters")).index_of(machine_id) is not None:
                group = full["stack_name"].removeprefix(f"shoal-{self.deployment}-")
                self._remove(group, machine_id)
                return

    def _remove(self, nodegroup_id: str, machine_id: str) -> bool:
        """The member removed from its group's stack; False when that stack is gone."""
        name = mb.stack_name(self.deployment, nodegroup_id)
        with self._lock(name):
            stack = self.cloud.stack(name)
            if stack is None:
                return False
            current = mb.Group.of(stack.get("parameters"))
            keep = [e for e in current.members.values() if e.get("id") != machine_id]
            update = mb.plan(current, keep)
            if update is not None:
                self.cloud.patch_stack(name, stack["id"], update.parameters(), _files(update))
                self._wrote(nodegroup_id)
            return True

    def _wrote(self, nodegroup_id: str) -> None:
        """The group changed: its next listing reads Nova's servers afresh."""
        self.servers.forget(mb.nova_tag(TAG_NODEGROUP, nodegroup_id))

    def list_group(
        self, nodegroup_id: str, tags: Mapping[str, str]
    ) -> tuple[list[Machine], GroupReport]:
        """The group's machines and its stack: two calls (the stack, Nova's servers)."""
        stack = self.cloud.stack(mb.stack_name(self.deployment, nodegroup_id))
        if stack is None:
            tags = {**tags, TAG_NODEGROUP: nodegroup_id}
            servers = self.servers.read(self._query(tags), False)
            self._delete_unheld(nodegroup_id, servers)
            return mb.machines([], servers, tags), GroupReport(None, GroupState.ABSENT)
        machines = self._machines([stack], {**tags, TAG_NODEGROUP: nodegroup_id})
        status = str(stack.get("stack_status") or "")
        state = (
            GroupState.DELETING if status.startswith("DELETE")
            else GroupState.FAILED if status.endswith("FAILED")
            else GroupState.IN_PROGRESS if status.endswith("IN_PROGRESS")
            else GroupState.COMPLETE
        )  # fmt: skip
        reason = cs.explained(str(stack.get("stack_status_reason") or "")) or None
        return machines, GroupReport(str(stack["id"]), state, reason)

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        if TAG_NODEGROUP in tags:
            one = self.cloud.stack(mb.stack_name(self.deployment, tags[TAG_NODEGROUP]))
            stacks = [one] if one else []
        else:
            stacks = []
            for s in self.cloud.stacks([self._dep_tag()]):
                if cs.is_cluster_stack(self.deployment, s["stack_name"]):
                    continue
                full = self.cloud.stack(s["stack_name"])
                if full:
                    stacks.append(full)
        return self._machines(stacks, tags)

    def _machines(self, stacks: list[dict[str, Any]], tags: Mapping[str, str]) -> list[Machine]:
        views = [
            mb.StackView(
                s["stack_name"],
                str(s.get("stack_status") or ""),
                cs.explained(str(s.get("stack_status_reason") or "")),
                mb.Group.of(s.get("parameters")),
            )
            for s in stacks
        ]
        query = self._query(tags)
        # One group's stack Heat works on: its servers may be a few seconds old (servers.py).
        working = (
            len(views) == 1 and TAG_NODEGROUP in tags and views[0].status.endswith("IN_PROGRESS")
        )
        return mb.machines(views, self.servers.read(query, working), tags)

    def _query(self, tags: Mapping[str, str]) -> list[str]:
        return [self._dep_tag(), *(mb.nova_tag(k, v) for k, v in sorted(tags.items()))]

    def _delete_unheld(self, nodegroup_id: str, servers: Sequence[Mapping[str, Any]]) -> None:
        """Servers of a group whose stack is gone: no stack holds them, so Heat never
        deletes them (a nested stack Heat lost track of after an RPC timeout of its own
        engine leaves its servers so). Deleted in Nova; listed DELETING meanwhile."""
        for server in servers:
            if mb.going(server):
                continue
            log.warning("node group %s: no Heat stack holds server %s (node %s); deleting it",
                        nodegroup_id, server.get("id"),
                        (server.get("metadata") or {}).get(TAG_NODE))  # fmt: skip
            self.cloud.delete_server(str(server["id"]))
        if servers:
            self._wrote(nodegroup_id)

    def reboot_machine(self, machine_id: str) -> None:
        """A reboot of the member's server, through Nova (Heat has no reboot, and the
        stack does not change: what the magnum-auto-healer does too): soft when it runs,
        hard when it does not (stopped, in ERROR: Nova refuses a soft one there); one
        under way is not restarted. Transient, or Permanent when it has no server."""
        server = self._server_of(machine_id)
        kind = mb.reboot_type(str(server.get("status") or ""))
        if kind is None:
            return
        self.cloud.server_action(str(server["id"]), {"reboot": {"type": kind}})
        self._acted_on(server)

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Reinstall the member's server with `image_id` through Nova, keeping its id,
        name, address and member index; a rebuild to that image under way is not
        restarted. The stack keeps the member's entry as it was made (a kept member's
        entry never changes, members.plan): Heat has nothing to redo, and a server Heat
        replaces later is made from that entry. Transient or Permanent."""
        server = self._server_of(machine_id)
        meta = dict(server.get("metadata") or {})
        rebuilding = str(server.get("status") or "").upper() == "REBUILD"
        if rebuilding and meta.get(mb.META_IMAGE) == image_id:
            return
        self._refresh_catalog()
        image = self._catalog.images.get(image_id)
        if image is None:
            raise PermanentError(f"image {image_id!r} does not exist in the cloud")
        meta[mb.META_IMAGE] = image_id  # a rebuild replaces the metadata whole
        self.cloud.server_action(
            str(server["id"]), {"rebuild": {"imageRef": image, "metadata": meta}}
        )
        self._acted_on(server)

    def _acted_on(self, server: Mapping[str, Any]) -> None:
        """A server changed behind its stack: its group's next listing reads it afresh."""
        group = (server.get("metadata") or {}).get(TAG_NODEGROUP)
        if group:
            self._wrote(str(group))

    def _server_of(self, machine_id: str) -> dict[str, Any]:
        """The machine's server (of two, the one Heat keeps: members.current_server);
        PermanentError when it has none or it is being deleted."""
        found = self.cloud.servers([self._dep_tag(), mb.nova_tag(TAG_NODE, machine_id)])
        mine: list[Mapping[str, Any]] = [
            s for s in found if (s.get("metadata") or {}).get(TAG_NODE) == machine_id
        ]
        if not mine:
            raise PermanentError(f"machine {machine_id} has no server (gone, or not made yet)")
        kept: Mapping[str, Any] = functools.reduce(mb.current_server, mine)
        server = dict(kept)
        if mb.going(server):
            raise PermanentError(f"machine {machine_id} is being deleted")
        return server

    # ------------------------------------------------------------ helpers
    def _dep_tag(self) -> str:
        return mb.nova_tag(mb.TAG_DEPLOYMENT, self.deployment)

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(name, threading.Lock())

    def _load_catalog(self) -> None:
        zones = tuple(
            str(z["zoneName"]) for z in self.cloud.zones() if z.get("zoneName") != "internal"
        )
        flavors: dict[str, dict[str, Any]] = {}
        for f in self.cloud.flavors():
            flavors[str(f["id"])] = f
            flavors.setdefault(str(f["name"]), f)
        images: dict[str, str] = {}
        for i in self.cloud.images():
            images[str(i["id"])] = str(i["id"])
            if i.get("name"):
                images.setdefault(str(i["name"]), str(i["id"]))
        self._catalog = Catalog(zones, flavors, images, time.monotonic())

    def _refresh_catalog(self) -> None:
        at = self._catalog.loaded_at
        if at is None or time.monotonic() - at > self.settings.catalog_refresh_seconds:
            self._load_catalog()

    def _check_quota(self, added: Sequence[dict[str, Any]]) -> None:
        """Refuse, as blocked by quota, members the project's compute quota cannot hold:
        Heat would accept the update and fail it later, after making part of it."""
        if not added:
            return
        limits = self.cloud.limits()
        cores = sum(int(self._catalog.flavors[e["flavor"]].get("vcpus", 0)) for e in added)
        ram = sum(int(self._catalog.flavors[e["flavor"]].get("ram", 0)) for e in added)
        asked = (("instances", len(added), "Instances"), ("cores", cores, "Cores"),
                 ("ram", ram, "RAMSize"))  # fmt: skip
        for what, more, key in asked:
            limit = int(limits.get(f"maxTotal{key}", -1))
            used = int(limits.get(f"total{key[:-4] if key == 'RAMSize' else key}Used", 0))
            if limit >= 0 and used + more > limit:
                raise BlockedError(
                    f"Quota exceeded for {what}: {more} more asked, {used} of {limit} used",
                    BlockedKind.QUOTA,
                )


def _files(update: mb.Update) -> dict[str, str]:
    """The stack's files after `update`: its members' template, written anew."""
    return {templates.MEMBERS_FILE: templates.members_file(update.members)}


def _spec_of(e: Mapping[str, Any], like: MachineSpec) -> MachineSpec:
    """A kept member as a spec (ensure_machine rebuilds the group's list from its stack)."""
    meta = e.get("metadata") or {}
    return MachineSpec(
        machine_id=e["id"],
        name=e.get("name", ""),
        project_id=meta.get("shoal-project", like.project_id),
        cluster_id=meta.get("shoal-cluster", like.cluster_id),
        nodegroup_id=like.nodegroup_id,
        role=meta.get("shoal-role", like.role),
        flavor_id=e["flavor"],
        image_id=e["image"],
        availability_zone=e.get("zone"),
        user_data=e.get("user_data") or None,
        keypair=e.get("key_name"),
    )
