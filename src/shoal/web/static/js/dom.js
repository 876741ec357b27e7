// Building the page from data: text only (textContent), never HTML from a string.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function text(value) {
  if (value === undefined || value === null || value === "") return "-";
  if (Array.isArray(value)) return value.length ? value.join(", ") : "-";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// Set a cell's text only when it changed (live updates touch what moved, nothing else).
export function setText(el, value) {
  const t = text(value);
  if (el.textContent !== t) el.textContent = t;
}

export function age(iso) {
  if (!iso) return "-";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 5400) return `${Math.round(s / 60)}m`;
  if (s < 172800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

export function statusClass(status) {
  const s = String(status || "");
  if (s.endsWith("FAILED") || s === "ERROR" || s === "failed") return "bad";
  if (s.endsWith("IN_PROGRESS") || s.startsWith("BLOCKED")) return "busy";
  if (s.endsWith("COMPLETE") || s === "ready" || s === "HEALTHY" || s === "healthy") return "good";
  return "";
}

export function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = false;
}

export function clearError() {
  const box = document.getElementById("error");
  box.textContent = "";
  box.hidden = true;
}

export function notice(message) {
  const box = document.getElementById("notice");
  box.textContent = message;
  box.hidden = !message;
}

// A modal confirmation; `strong` adds a warning and asks to type `expect` first.
export function confirmAction(message, strong, expect) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = message;
  const warn = document.getElementById("confirm-strong");
  warn.textContent = strong || "";
  warn.hidden = !strong;
  const box = document.getElementById("confirm-type-box");
  const input = document.getElementById("confirm-type");
  const ok = document.getElementById("confirm-ok");
  box.hidden = !expect;
  input.value = "";
  document.getElementById("confirm-expect").textContent = expect || "";
  ok.disabled = !!expect;
  input.oninput = () => {
    ok.disabled = input.value !== expect;
  };
  return new Promise((resolve) => {
    dialog.onclose = () => resolve(dialog.returnValue === "ok");
    dialog.returnValue = "cancel";
    dialog.showModal();
  });
}
