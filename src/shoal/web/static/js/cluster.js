// One cluster, live: its node groups as sections (attributes, a state bar, nodes with
// their phase and health), rollouts, operations, virt hosts with their VMs, events.
import * as actions from "./actions.js";
import * as api from "./api.js";
import { kubeVersion } from "./clusters.js";
import { age, confirmAction, h, setText, statusClass, text } from "./dom.js";
import { groupCounts, health, phase } from "./phase.js";
import { can } from "./session.js";

export const NODE_COLUMNS = ["name", "address", "zone", "cloud id", "state", "phase", "health", "heartbeat", "reason"];
const EVENTS_KEPT = 300;
const NODES_EVERY = 5; // polls: the node list at least every 10 s while nothing moves
const OPERATION_KINDS = ["restart-services", "upgrade-packages", "upgrade-images", "rebase", "reboot", "rebuild", "replace"];

function condition(obj, type) {
  return (obj.conditions || []).find((c) => c.type === type);
}

// What the rollout of a group is doing and waits for, from its UpToDate condition.
export function rolloutText(group) {
  const c = condition(group, "UpToDate");
  if (!c) return "-";
  return c.status === "True" ? "up to date" : `${c.reason}: ${c.message || ""}`.trim();
}

export function breakerText(group) {
  const c = condition(group, "Healthy");
  if (!c) return "-";
  if (c.reason === "MaxUnhealthyExceeded") return `open: repairs stopped (${c.message})`;
  return c.status === "True" ? "closed" : `closed: ${c.message || c.reason}`;
}

function revisions(nodes) {
  const counts = new Map();
  for (const n of nodes) counts.set(n.revision || "?", (counts.get(n.revision || "?") || 0) + 1);
  return [...counts].map(([r, k]) => `${String(r).slice(0, 8)} ×${k}`).join(", ") || "-";
}

function dl(pairs) {
  const out = h("dl", { class: "facts" });
  const cells = {};
  for (const [key, label, wide] of pairs) {
    cells[key] = h("dd", { dataset: { field: key } });
    out.append(h("div", { class: wide ? "wide" : null }, h("dt", {}, label), cells[key]));
  }
  return { el: out, cells };
}

function button(label, attrs, onclick) {
  return h("button", { type: "button", ...attrs, onclick }, label);
}

export function make(ident) {
  let uuid = ident;
  let cluster = null;
  let groups = [];
  let nodes = [];
  let providers = null; // when the cluster has virt hosts: their flavors' sizes (re-read now and then)
  let lastEvent = 0;
  const sections = new Map();

  const title = h("h1", { id: "cluster-name" }, ident);
  const facts = dl([
    ["status", "status"],
    ["status_reason", "reason", true],
    ["health_status", "health"],
    ["health_reason", "health reason", true],
    ["api_address", "API address"],
    ["kubernetes", "Kubernetes"],
    ["counts", "masters / workers"],
    ["project_id", "project"],
    ["age", "age"],
    ["faults", "faults", true],
  ]);
  const clusterActions = h("div", { class: "actions", id: "cluster-actions" });
  const groupsBox = h("div", { id: "groups" });
  const opsBody = h("tbody", { id: "operations-body" });
  const opDetail = h("div", { id: "operation-detail" });
  const eventsFilter = h("select", { id: "events-filter" }, h("option", { value: "" }, "whole cluster"));
  const eventsList = h("ol", { id: "events", class: "events" });
  const root = h(
    "div",
    { class: "cluster" },
    h("section", { class: "card" }, h("div", { class: "row" }, h("a", { href: "#/" }, "← clusters"), title), facts.el, clusterActions),
    groupsBox,
    h(
      "section",
      { class: "card", id: "operations-card" },
      h("h2", {}, "Operations"),
      h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ["kind", "group", "state", "progress", "message", "started"].map((c) => h("th", {}, c)))), opsBody),
      opDetail,
    ),
    h("section", { class: "card" }, h("div", { class: "row" }, h("h2", {}, "Events"), h("label", {}, "show ", eventsFilter)), eventsList),
  );
  eventsFilter.addEventListener("change", filterEvents);

  function groupName(id) {
    const g = groups.find((x) => x.uuid === id || String(x.id) === String(id));
    return g ? g.name : "";
  }

  function buildClusterActions() {
    const box = [];
    if (can("cluster:delete")) {
      box.push(
        button("Delete cluster", { class: "danger", id: "delete-cluster" }, async () => {
          const ok = await confirmAction(`Delete cluster ${cluster.name} and all its nodes?`, "Every node of every group is deleted.", cluster.name);
          if (ok && (await actions.deleteCluster(uuid))) location.hash = "#/"; // it goes from the list
        }),
      );
    }
    if (can("cluster:rollout")) {
      for (const verb of ["pause", "resume", "abort"]) {
        box.push(button(`${verb[0].toUpperCase()}${verb.slice(1)} rollout`, { id: `rollout-${verb}` }, async () => {
          if (await actions.rollout(uuid, verb)) refresh();
        }));
      }
    }
    if (can("cluster:upgrade")) {
      const tpl = h("input", { id: "upgrade-template", placeholder: "cluster template", size: 16 });
      box.push(
        h("span", { class: "inline" }, tpl, button("Upgrade", { id: "upgrade" }, async () => {
          if (tpl.value && (await actions.upgrade(uuid, tpl.value))) refresh();
        })),
      );
    }
    if (can("operation:create")) {
      const kind = h("select", { id: "operation-kind" }, OPERATION_KINDS.map((k) => h("option", { value: k }, k)));
      const group = h("select", { id: "operation-group" }, h("option", { value: "" }, "every group"), groups.map((g) => h("option", { value: g.name }, g.name)));
      const batch = h("input", { id: "operation-batch", type: "number", min: 1, value: 1, size: 3 });
      box.push(
        h("span", { class: "inline" }, kind, group, "batch ", batch, button("Start operation", { id: "operation-start" }, async () => {
          const body = { kind: kind.value, batch_size: Number(batch.value) || 1 };
          if (group.value) body.nodegroup = group.value;
          if (await actions.startOperation(uuid, body)) refresh();
        })),
      );
    }
    clusterActions.replaceChildren(...box);
  }

  function renderCluster() {
    title.textContent = cluster.name;
    const f = facts.cells;
    setText(f.status, cluster.status);
    f.status.className = statusClass(cluster.status);
    setText(f.status_reason, cluster.status_reason);
    setText(f.health_status, cluster.health_status);
    const hr = cluster.health_status_reason || {};
    setText(f.health_reason, Object.entries(hr).map(([k, v]) => `${k}: ${v}`).join("; "));
    setText(f.api_address, cluster.api_address);
    setText(f.kubernetes, kubeVersion(cluster));
    setText(f.counts, `${cluster.master_count} / ${cluster.node_count}`);
    setText(f.project_id, cluster.project_id);
    setText(f.age, age(cluster.created_at));
    const faults = cluster.faults || {};
    setText(f.faults, Object.entries(faults).map(([k, v]) => `${k}: ${v}`).join("; "));
    const names = groups.map((g) => g.name).join("\n"); // the operation's group choices
    if (clusterActions.dataset.groups !== names) {
      clusterActions.dataset.groups = names;
      buildClusterActions();
    }
  }

  function makeSection(g) {
    const sec = {};
    const info = dl([
      ["role", "role"],
      ["provider", "provider"],
      ["flavor_id", "flavor"],
      ["image_id", "image"],
      ["zones", "zones"],
      ["counts", "min / desired / max"],
      ["status", "status"],
      ["status_reason", "reason", true],
      ["health", "health"],
      ["breaker", "repair breaker"],
      ["policy", "surge / unavailable"],
      ["rollout", "rollout"],
      ["revisions", "revisions"],
    ]);
    const bar = h("div", { class: "statebar", title: "ready / updating / failed" });
    const parts = { ready: h("span", { class: "ready" }), updating: h("span", { class: "updating" }), failed: h("span", { class: "failed" }) };
    bar.append(parts.ready, parts.updating, parts.failed);
    const legend = h("span", { class: "legend" });
    const count = h("span", { class: "count" });
    const buttons = h("span", { class: "actions" });
    if (can("cluster:resize")) {
      buttons.append(
        // the group as last polled (sec.group), not as first seen
        button("−", { class: "scale-down", title: "scale down by one (shoal picks the node)" }, () => actions.scale(uuid, sec.group.name, sec.group.node_count - 1).then(refresh)),
        count,
        button("+", { class: "scale-up", title: "scale up by one" }, () => actions.scale(uuid, sec.group.name, sec.group.node_count + 1).then(refresh)),
      );
    }
    const heads = [...NODE_COLUMNS, ...(g.role === "virt" ? ["VMs"] : []), ...(can("cluster:resize") ? [""] : [])];
    const body = h("tbody");
    const virt = g.role === "virt" ? h("details", { class: "virt" }, h("summary", {}, "VM slots and domain template"), h("pre", { class: "vms" }), h("pre", { class: "template" })) : null;
    const el = h(
      "section",
      { class: "card group", dataset: { group: g.name } },
      h("div", { class: "row" }, h("h2", {}, g.name), bar, legend, buttons),
      info.el,
      virt,
      h("table", { class: "grid nodes" }, h("thead", {}, h("tr", {}, heads.map((c) => h("th", {}, c)))), body),
    );
    Object.assign(sec, { el, info, parts, legend, count, body, rows: new Map(), virt, group: g });
    return sec;
  }

  function vmsOn(host) {
    return nodes.filter((n) => n.vm !== null && n.vm !== undefined && n.availability_zone === host.name);
  }

  // What a virt host's VMs take (their slots' cpu and ram, GiB; 1 each by default) and
  // what the host has (its flavor's size, as its provider reports it; unknown: not said).
  function hostLoad(g, host) {
    const vms = vmsOn(host);
    const slots = new Map((g.vms || []).map((v) => [String(v.id), v]));
    let cpu = 0;
    let ram = 0;
    for (const v of vms) {
      const slot = slots.get(String(v.vm)) || {};
      cpu += Number(slot.cpu ?? 1);
      ram += Number(slot.ram ?? 1);
    }
    const p = (providers || []).find((x) => (g.provider ? x.name === g.provider : x.default));
    const size = p && p.flavor_sizes ? p.flavor_sizes[host.flavor_id] : null;
    const names = vms.map((v) => v.name).join(", ") || "no VM";
    const use = size
      ? `${cpu} of ${size.vcpus} vCPU, ${ram} of ${size.ram_mb / 1024} GiB`
      : `${cpu} vCPU, ${ram} GiB (host size unknown)`;
    return `${names} · ${use}`;
  }

  function makeRow(s, n) {
    const cells = NODE_COLUMNS.map(() => h("td"));
    const extra = s.group.role === "virt" ? h("td", { class: "vms-on" }) : null;
    const tools = can("cluster:resize") ? h("td", { class: "node-actions" }) : null;
    if (tools) {
      tools.append(
        button("Remove", { class: "remove danger" }, () => remove(s, n.name)),
        can("operation:create") ? button("Replace", { class: "replace" }, () => replace(s, n.name)) : null,
      );
    }
    const tr = h("tr", { dataset: { node: n.name, uuid: n.uuid } }, cells, extra, tools);
    return { tr, cells, extra };
  }

  async function remove(s, name) {
    const host = nodes.find((n) => n.name === name);
    const vms = s.group.role === "virt" && host ? vmsOn(host) : [];
    const strong = vms.length
      ? `${name} is a virt host carrying ${vms.length} VM(s): ${vms.map((v) => v.name).join(", ")}. Removing it deletes them too.`
      : "";
    const ok = await confirmAction(`Remove node ${name} from ${s.group.name} (${s.group.node_count} → ${s.group.node_count - 1})?`, strong, vms.length ? name : "");
    if (ok && (await actions.removeNode(uuid, s.group.name, s.group.node_count, name, vms.length > 0))) refresh();
  }

  async function replace(s, name) {
    const ok = await confirmAction(`Replace node ${name} with a new machine?`, "", "");
    if (ok && (await actions.replaceNode(uuid, s.group.name, name))) refresh();
  }

  function renderGroups() {
    const keep = new Set();
    const byGroup = new Map();
    for (const n of nodes) {
      if (!byGroup.has(n.nodegroup_id)) byGroup.set(n.nodegroup_id, []);
      byGroup.get(n.nodegroup_id).push(n);
    }
    for (const g of groups) {
      keep.add(g.uuid);
      let s = sections.get(g.uuid);
      if (!s) {
        s = makeSection(g);
        sections.set(g.uuid, s);
      }
      s.group = g;
      groupsBox.append(s.el);
      const f = s.info.cells;
      setText(f.role, g.role);
      setText(f.provider, g.provider);
      setText(f.flavor_id, g.flavor_id);
      setText(f.image_id, g.image_id);
      setText(f.zones, g.availability_zones);
      setText(f.counts, `${text(g.min_node_count)} / ${g.node_count} / ${text(g.max_node_count)}`);
      setText(f.status, g.status);
      f.status.className = statusClass(g.status);
      setText(f.status_reason, g.status_reason);
      setText(f.health, g.health_status_reason && Object.keys(g.health_status_reason).length ? `${g.health_status}: ${text(g.health_status_reason)}` : g.health_status);
      setText(f.breaker, breakerText(g));
      const r = g.rollout || {};
      setText(f.policy, `${text(r.max_surge)} / ${text(r.max_unavailable)}`);
      setText(f.rollout, rolloutText(g));
      const mine = byGroup.get(g.uuid) || [];
      setText(f.revisions, revisions(mine));
      const k = groupCounts(g);
      for (const part of ["ready", "updating", "failed"]) s.parts[part].style.flexGrow = String(k[part]);
      setText(s.legend, `${k.ready} ready · ${k.updating} updating · ${k.failed} failed`);
      setText(s.count, g.node_count);
      if (s.virt) {
        setText(s.virt.querySelector(".vms"), JSON.stringify(g.vms || [], null, 1));
        setText(s.virt.querySelector(".template"), g.vm_template || "(the built-in domain template)");
      }
      renderNodes(s, mine);
    }
    for (const [id, s] of sections) {
      if (!keep.has(id)) {
        s.el.remove();
        sections.delete(id);
      }
    }
  }

  function renderNodes(s, mine) {
    const keep = new Set();
    for (const n of mine) {
      keep.add(n.uuid);
      let row = s.rows.get(n.uuid);
      if (!row) {
        row = makeRow(s, n);
        s.rows.set(n.uuid, row);
      }
      s.body.append(row.tr);
      const c = row.cells;
      setText(c[0], n.name);
      setText(c[1], n.address);
      setText(c[2], n.availability_zone);
      setText(c[3], n.provider_id);
      setText(c[4], n.state);
      c[4].className = statusClass(n.state);
      const p = phase(n);
      setText(c[5], p);
      c[5].className = `phase ${statusClass(p)}`;
      const hl = health(n);
      setText(c[6], hl === "repairing" ? `repairing (step ${n.repair_step})` : hl);
      c[6].className = statusClass(hl);
      setText(c[7], n.agent_seen_at ? `${age(n.agent_seen_at)} ago` : "-");
      setText(c[8], n.reason);
      c[8].className = "reason";
      if (row.extra) setText(row.extra, hostLoad(s.group, n));
      row.tr.dataset.phase = p;
    }
    for (const [id, row] of s.rows) {
      if (!keep.has(id)) {
        row.tr.remove();
        s.rows.delete(id);
      }
    }
  }

  function renderOperations(ops) {
    const rows = ops.slice(-20).reverse().map((op) =>
      h(
        "tr",
        { dataset: { operation: op.uuid }, class: "clickable", onclick: () => showOperation(op.uuid) },
        h("td", {}, op.kind),
        h("td", {}, groupName(op.nodegroup_id) || "-"),
        h("td", { class: statusClass(op.state === "SUCCEEDED" ? "COMPLETE" : op.state === "FAILED" ? "FAILED" : "IN_PROGRESS") }, op.state),
        h("td", {}, op.progress),
        h("td", {}, text(op.message)),
        h("td", {}, age(op.created_at)),
      ),
    );
    const key = JSON.stringify(ops.map((o) => [o.uuid, o.state, o.progress, o.message]));
    if (opsBody.dataset.key !== key) {
      opsBody.replaceChildren(...rows);
      opsBody.dataset.key = key;
    }
  }

  async function showOperation(opId) {
    const op = await api.get(`/clusters/${api.enc(uuid)}/operations/${api.enc(opId)}`);
    const names = new Map(nodes.map((n) => [n.uuid, n.name]));
    opDetail.replaceChildren(
      h("h3", {}, `${op.kind}: ${op.state} (${op.progress})`),
      h(
        "table",
        { class: "grid" },
        h("thead", {}, h("tr", {}, ["node", "state", "exit code", "output"].map((c) => h("th", {}, c)))),
        h("tbody", {}, op.tasks.map((t) => h("tr", {}, h("td", {}, names.get(t.node_id) || t.node_id), h("td", {}, t.state), h("td", {}, text(t.exit_code)), h("td", {}, h("pre", {}, t.output || ""))))),
      ),
    );
  }

  function filterEvents() {
    const want = eventsFilter.value;
    for (const li of eventsList.children) li.hidden = !!want && li.dataset.group !== want;
  }

  function renderEvents(events) {
    for (const e of events) {
      lastEvent = Math.max(lastEvent, e.id);
      const li = h(
        "li",
        { class: e.type === "Warning" ? "warning" : "", dataset: { group: e.nodegroup_id || "" } },
        h("time", {}, (e.time || "").replace("T", " ").slice(0, 19)),
        h("span", { class: "group-name" }, groupName(e.nodegroup_id) || "cluster"),
        h("b", {}, e.reason),
        h("span", {}, e.message),
      );
      eventsList.prepend(li);
    }
    while (eventsList.childElementCount > EVENTS_KEPT) eventsList.lastChild.remove();
    const options = ["", ...groups.map((g) => g.uuid)];
    if ([...eventsFilter.options].map((o) => o.value).join() !== options.join()) {
      const chosen = eventsFilter.value;
      eventsFilter.replaceChildren(h("option", { value: "" }, "whole cluster"), groups.map((g) => h("option", { value: g.uuid, selected: g.uuid === chosen }, `group ${g.name}`)));
    }
    filterEvents();
  }

  // The node list is the costly read: asked when something moved (the cluster or a group
  // changed, or is in progress), and every NODES_EVERY-th poll otherwise (a heartbeat).
  let ticks = 0;
  let lastShape = "";
  function nodesDue(gs) {
    const shape = JSON.stringify([cluster.status, cluster.updated_at, gs.map((g) => [g.status, g.updated_at, g.nodes_total, g.nodes_ready, g.nodes_failed, g.node_count])]);
    const busy = !String(cluster.status).endsWith("COMPLETE") || gs.some((g) => !String(g.status).endsWith("COMPLETE"));
    const due = busy || shape !== lastShape || ticks % NODES_EVERY === 0;
    lastShape = shape;
    ticks += 1;
    return due;
  }

  async function refresh() {
    cluster = await api.get(`/clusters/${api.enc(ident)}`);
    uuid = cluster.uuid;
    const c = `/clusters/${api.enc(uuid)}`;
    const [gs, evs, ops] = await Promise.all([
      api.listAll(`${c}/nodegroups/detail`, "nodegroups"),
      api.get(`${c}/events?after=${lastEvent}&limit=500`),
      api.get(`${c}/operations`),
    ]);
    if (nodesDue(gs) || evs.events.length) nodes = await api.listAll(`${c}/nodes?limit=1000`, "nodes");
    groups = gs;
    if (gs.some((g) => g.role === "virt") && (providers === null || ticks % 20 === 0)) {
      providers = (await api.get("/providers")).providers || [];
    }
    renderCluster();
    renderGroups();
    renderOperations(ops.operations || []);
    renderEvents(evs.events || []);
  }

  return { root, refresh };
}
