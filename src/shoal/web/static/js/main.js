// The dashboard's entry: log in once (the token stays in this tab's sessionStorage),
// learn what the caller may do, then route on the URL's fragment and poll the view.
import * as api from "./api.js";
import { clearError, h, notice, showError } from "./dom.js";
import * as clusterView from "./cluster.js";
import * as clustersView from "./clusters.js";
import * as createView from "./create.js";
import { can, offerProjects, session } from "./session.js";

export const POLL_MS = 2000;
let current = null; // {view, timer, alive}

function main() {
  return document.getElementById("main");
}

function loginForm(reason) {
  const input = h("input", {
    id: "token",
    type: "password",
    autocomplete: "off",
    required: true,
    placeholder: "shoal or Keystone token",
  });
  const form = h(
    "form",
    { id: "login", class: "card login" },
    h("h1", {}, "Log in to shoal"),
    h("p", { class: "muted" }, "Paste a token (shoal token create, or a Keystone token). It is kept in this tab only."),
    reason ? h("p", { class: "error-text" }, reason) : null,
    h("label", {}, "Token ", input),
    h("button", { type: "submit", id: "login-submit" }, "Log in"),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    api.setToken(input.value);
    await start();
  });
  stop();
  main().replaceChildren(form);
  input.focus();
  document.getElementById("logout").hidden = true;
  document.getElementById("who").textContent = "";
  document.getElementById("project-box").hidden = true;
}

function header() {
  const c = session.caller;
  document.getElementById("who").textContent = `${c.user_id} · ${c.role} · project ${c.project_id}`;
  document.getElementById("logout").hidden = false;
  document.getElementById("nav").replaceChildren(
    h("a", { href: "#/" }, "Clusters"),
    ...(can("cluster:create") ? [h("a", { href: "#/new", id: "nav-new" }, "New cluster")] : []),
  );
  const box = document.getElementById("project-box");
  box.hidden = !can("all_projects");
  offerProjects([]);
}

function stop() {
  if (current) {
    current.alive = false;
    clearTimeout(current.timer);
    current = null;
  }
}

// Render the view for the fragment, then refresh it every POLL_MS while the tab is visible.
async function route() {
  stop();
  clearError();
  notice("");
  const hash = location.hash || "#/";
  const m = hash.match(/^#\/clusters\/([^/]+)$/);
  const view = m ? clusterView.make(decodeURIComponent(m[1])) : hash === "#/new" ? createView.make() : clustersView.make();
  const state = { view, timer: null, alive: true };
  current = state;
  main().replaceChildren(view.root);
  const tick = async () => {
    if (!state.alive) return;
    if (!document.hidden) {
      try {
        await view.refresh();
      } catch (err) {
        if (err.status === 401) {
          api.clearToken();
          loginForm("The token was refused (expired or revoked?): log in again.");
          return;
        }
        showError(`${err.status ? err.status + ": " : ""}${err.message}`);
      }
    }
    if (state.alive && view.live !== false) state.timer = setTimeout(tick, POLL_MS);
  };
  await tick();
}

// Re-poll now (the tab came back), without waiting for the next tick.
async function refreshNow() {
  if (current && current.alive) {
    try {
      await current.view.refresh();
    } catch (_) {
      // the next tick reports it
    }
  }
}

async function start() {
  if (!api.token()) {
    loginForm();
    return;
  }
  try {
    session.caller = await api.get("/auth/caller");
  } catch (err) {
    api.clearToken();
    loginForm(err.status === 401 ? "This token was refused: check it and try again." : err.message);
    return;
  }
  header();
  await route();
}

document.getElementById("logout").addEventListener("click", () => {
  api.clearToken();
  session.caller = null;
  location.hash = "#/";
  loginForm();
});
document.getElementById("project").addEventListener("change", (ev) => {
  session.project = ev.target.value;
  route();
});
window.addEventListener("hashchange", () => {
  if (session.caller) route();
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refreshNow();
});
start();
