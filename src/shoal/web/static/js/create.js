// A new cluster from a cluster template (POST /v1/clusters with cluster_template_id).
import * as actions from "./actions.js";
import * as api from "./api.js";
import { h } from "./dom.js";

export function make() {
  const name = h("input", { id: "new-name", required: true, pattern: "[a-zA-Z][a-zA-Z0-9_.\\-]*", placeholder: "my-cluster" });
  const template = h("select", { id: "new-template", required: true });
  const masters = h("input", { id: "new-masters", type: "number", min: 1, step: 2, placeholder: "template's" });
  const workers = h("input", { id: "new-workers", type: "number", min: 0, placeholder: "template's" });
  const form = h(
    "form",
    { class: "card", id: "create-form" },
    h("h1", {}, "New cluster from a template"),
    h("label", {}, "name ", name),
    h("label", {}, "cluster template ", template),
    h("label", {}, "masters ", masters),
    h("label", {}, "workers ", workers),
    h("button", { type: "submit", id: "create-submit" }, "Create"),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { name: name.value, cluster_template_id: template.value };
    if (masters.value) body.master_count = Number(masters.value);
    if (workers.value) body.node_count = Number(workers.value);
    if (await actions.createCluster(body)) location.hash = `#/clusters/${encodeURIComponent(name.value)}`;
  });
  async function refresh() {
    const templates = await api.listAll("/clustertemplates", "clustertemplates");
    template.replaceChildren(...templates.map((t) => h("option", { value: t.uuid }, t.name)));
  }
  return { root: form, refresh, live: false };
}
