// Who is logged in (from GET /v1/auth/caller) and which project an admin looks at.
import { h } from "./dom.js";

export const session = { caller: null, project: "" }; // project: "" = own, "*" = all (admins)

export function can(rule) {
  return !!session.caller && session.caller.allowed.includes(rule);
}

// The query of a listing: an admin lists every project's (and picks one here).
export function listScope() {
  return can("all_projects") ? { all_tenants: 1 } : {};
}

export function inScope(item) {
  const p = session.project || session.caller.project_id;
  return p === "*" || item.project_id === p;
}

// Admins: the projects seen in an all-projects listing become choices.
export function offerProjects(ids) {
  const select = document.getElementById("project");
  if (!can("all_projects")) return;
  const own = session.caller.project_id;
  const wanted = ["", "*", ...[...new Set(ids)].filter((p) => p && p !== own).sort()];
  const have = [...select.options].map((o) => o.value);
  if (have.join("\n") === wanted.join("\n")) return;
  const label = (p) => (p === "" ? `${own} (mine)` : p === "*" ? "all projects" : p);
  select.replaceChildren(...wanted.map((p) => h("option", { value: p, selected: p === session.project }, label(p))));
}
