// The clusters of the project (or, for an admin, of the chosen project or all of them):
// name, status and reason, health, control-plane and worker counts, Kubernetes version,
// age; filtered by status.
import * as api from "./api.js";
import { age, h, setText, statusClass } from "./dom.js";
import { inScope, listScope, offerProjects, session } from "./session.js";

export const FILTERS = [
  ["", "all"],
  ["IN_PROGRESS", "in progress"],
  ["COMPLETE", "complete"],
  ["FAILED", "failed"],
];

export function kubeVersion(c) {
  return c.coe_version || (c.labels || {}).kube_tag || "";
}

const COLUMNS = ["name", "status", "reason", "health", "masters", "workers", "kubernetes", "age"];

export function make() {
  let filter = "";
  let last = [];
  const select = h(
    "select",
    { id: "status-filter" },
    FILTERS.map(([v, label]) => h("option", { value: v }, label)),
  );
  const body = h("tbody", { id: "clusters-body" });
  const empty = h("p", { class: "muted", id: "clusters-empty", hidden: true }, "No clusters here yet.");
  const showProject = session.project === "*";
  const head = h("tr", {}, [...(showProject ? ["project"] : []), ...COLUMNS].map((c) => h("th", {}, c)));
  const root = h(
    "section",
    { class: "card" },
    h("div", { class: "row" }, h("h1", {}, "Clusters"), h("label", { class: "filter" }, "status ", select)),
    h("table", { class: "grid", id: "clusters" }, h("thead", {}, head), body),
    empty,
  );
  const rows = new Map();

  function render() {
    const shown = last.filter((c) => inScope(c) && (!filter || String(c.status).endsWith(filter)));
    const keep = new Set();
    for (const c of shown) {
      keep.add(c.uuid);
      let row = rows.get(c.uuid);
      if (!row) {
        const cells = COLUMNS.map(() => h("td"));
        const link = h("a", { href: `#/clusters/${c.uuid}` });
        cells[0].append(link);
        row = { tr: h("tr", { dataset: { uuid: c.uuid, name: c.name } }, showProject ? h("td") : null, cells), cells, link };
        rows.set(c.uuid, row);
      }
      body.append(row.tr); // keeps the listing's order
      if (showProject) setText(row.tr.firstChild, c.project_id);
      setText(row.link, c.name);
      setText(row.cells[1], c.status);
      row.cells[1].className = statusClass(c.status);
      setText(row.cells[2], c.status_reason);
      setText(row.cells[3], c.health_status);
      row.cells[3].className = statusClass(c.health_status);
      setText(row.cells[4], c.master_count);
      setText(row.cells[5], c.node_count);
      setText(row.cells[6], kubeVersion(c));
      setText(row.cells[7], age(c.created_at));
    }
    for (const [uuid, row] of rows) {
      if (!keep.has(uuid)) {
        row.tr.remove();
        rows.delete(uuid);
      }
    }
    empty.hidden = shown.length > 0;
  }

  select.addEventListener("change", () => {
    filter = select.value;
    render();
  });

  async function refresh() {
    last = await api.listAll("/clusters/detail" + api.q(listScope()), "clusters");
    offerProjects(last.map((c) => c.project_id));
    render();
  }
  return { root, refresh };
}
