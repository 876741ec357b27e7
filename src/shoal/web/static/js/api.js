// The client of /v1: the same endpoints the `shoal` CLI calls, with the caller's token
// in the X-Auth-Token header (never in a URL), kept in this tab's sessionStorage.
const KEY = "shoal.token";
const VERSION = "container-infra latest";

export class ApiError extends Error {
  constructor(status, message, requestId) {
    super(message);
    this.status = status;
    this.requestId = requestId;
  }
}

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(value) {
  sessionStorage.setItem(KEY, value.trim());
}

export function clearToken() {
  sessionStorage.removeItem(KEY);
}

// Magnum's error shape: {"errors": [{"title", "detail", "request_id", ...}]}
async function refusal(response) {
  let title = `${response.status} ${response.statusText}`;
  let requestId = response.headers.get("X-OpenStack-Request-Id") || "";
  try {
    const body = await response.json();
    const first = (body.errors || [])[0];
    if (first) {
      title = first.detail || first.title || title;
      requestId = first.request_id || requestId;
    }
  } catch (_) {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, title, requestId);
}

// One request to /v1`path`; the parsed JSON answer (null when empty); ApiError when refused.
export async function call(method, path, body) {
  const headers = { Accept: "application/json", "OpenStack-API-Version": VERSION };
  const t = token();
  if (t) headers["X-Auth-Token"] = t;
  const init = {
    method,
    headers,
    credentials: "omit",
    cache: "no-store",
    redirect: "error",
    referrerPolicy: "no-referrer",
  };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch("/v1" + path, init);
  if (!response.ok) throw await refusal(response);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body === undefined ? {} : body);
export const del = (path) => call("DELETE", path);

// Every page of a list (`next` is an absolute URL of this server: keep its path and query).
export async function listAll(path, key) {
  const out = [];
  let next = path;
  for (let pages = 0; next && pages < 100; pages++) {
    const page = await get(next);
    out.push(...(page[key] || []));
    if (!page.next) break;
    const url = new URL(page.next, location.href);
    next = url.pathname.replace(/^\/v1/, "") + url.search;
  }
  return out;
}

export function q(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") s.set(k, v);
  const text = s.toString();
  return text ? "?" + text : "";
}

export const enc = encodeURIComponent;
