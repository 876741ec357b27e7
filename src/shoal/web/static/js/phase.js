// A node's phase and health for display, derived from what the API returns (its state,
// address, ready_at, reason, repair_step). Pure: a table of rules, first match wins.

export const PHASE_RULES = [
  [(n) => n.state === "DELETING" || n.to_delete, "deleting"],
  [(n) => n.state === "ERROR", "failed"],
  [(n) => n.state === "PENDING", "creating"],
  [(n) => n.state === "BUILDING" && !n.address, "booting"],
  [(n) => n.state === "BUILDING", "bootstrapping"],
  [(n) => n.state === "ACTIVE" && !!n.ready_at, "ready"],
  [(n) => n.state === "ACTIVE", "bootstrapping"],
];

export function phase(node) {
  for (const [when, name] of PHASE_RULES) if (when(node)) return name;
  return "unknown";
}

export const HEALTH_RULES = [
  [(n) => n.state !== "ACTIVE", "-"],
  [(n) => (n.repair_step || 0) > 0, "repairing"],
  [(n) => !!n.reason, "unhealthy"],
  [() => true, "healthy"],
];

export function health(node) {
  for (const [when, name] of HEALTH_RULES) if (when(node)) return name;
  return "-";
}

// A group's state bar: ready, updating (anything on its way), failed.
export function groupCounts(group) {
  const total = group.nodes_total || 0;
  const ready = group.nodes_ready || 0;
  const failed = group.nodes_failed || 0;
  return { ready, failed, updating: Math.max(0, total - ready - failed), total };
}
