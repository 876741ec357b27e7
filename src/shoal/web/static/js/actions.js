// Every action goes through the same API calls the CLI makes; a refusal shows the
// API's own message. Each returns true when the API accepted it.
import * as api from "./api.js";
import { clearError, notice, showError } from "./dom.js";

async function run(what, request) {
  clearError();
  try {
    await request();
    notice(`${what}: accepted`);
    return true;
  } catch (err) {
    const id = err.requestId ? ` (${err.requestId})` : "";
    const status = err.status ? `${err.status}: ` : "";
    showError(`${what} refused: ${status}${err.message}${id}`);
    return false;
  }
}

const c = (cluster) => `/clusters/${api.enc(cluster)}`;

export function scale(cluster, group, count) {
  return run(`scale ${group} to ${count}`, () =>
    api.post(`${c(cluster)}/actions/resize`, { nodegroup: group, node_count: count }),
  );
}

// Remove exactly `node` (by name) from `group`, lowering its count by one.
export function removeNode(cluster, group, count, node, force) {
  const body = { nodegroup: group, node_count: count - 1, nodes_to_remove: [node] };
  if (force) body.force = true;
  return run(`remove ${node}`, () => api.post(`${c(cluster)}/actions/resize`, body));
}

export function replaceNode(cluster, group, node) {
  return run(`replace ${node}`, () =>
    api.post(`${c(cluster)}/operations`, { kind: "replace", nodegroup: group, nodes: [node] }),
  );
}

export function startOperation(cluster, body) {
  return run(`operation ${body.kind}`, () => api.post(`${c(cluster)}/operations`, body));
}

export function upgrade(cluster, template, group) {
  const body = { cluster_template: template };
  if (group) body.nodegroup = group;
  return run(`upgrade to ${template}`, () => api.post(`${c(cluster)}/actions/upgrade`, body));
}

export function rollout(cluster, verb, group) {
  return run(`${verb} rollout`, () =>
    api.post(`${c(cluster)}/actions/${verb}`, group ? { nodegroup: group } : {}),
  );
}

export function deleteCluster(cluster) {
  return run(`delete ${cluster}`, () => api.del(c(cluster)));
}

export function createCluster(body) {
  return run(`create ${body.name || "cluster"}`, () => api.post("/clusters", body));
}
