// The Keel web console: sign-in and routing between the pages (core.js, pages.js, run.js and
// graph.js are loaded before this). The navigation is shown only once signed in.
"use strict";

function showLogin(message) {
  stopLive();
  document.getElementById("sign-out").hidden = true;
  document.getElementById("nav").hidden = true;
  const input = el("input", { type: "password", id: "key", name: "key", autocomplete: "current-password", required: true });
  const error = el("p", { class: "error", role: "alert" }, message || "");
  const form = el("form", { class: "login", onsubmit: async (event) => {
    event.preventDefault();
    try {
      const answer = await api("/console/login", { method: "POST", body: { key: input.value } });
      state.csrf = answer.csrf || null;
      document.getElementById("sign-out").hidden = false;
      enter();
    } catch (e) {
      error.textContent = e.status === 403
        ? "That key may not open the console: sign in with an operator key."
        : e.status === 401 ? "That key is not valid." : e.message;
    }
  } },
    el("h1", {}, "Sign in to Keel"),
    el("label", { for: "key" }, "Operator API key", input),
    el("button", { class: "primary", type: "submit" }, "Sign in"),
    error);
  show(form);
  input.focus();
}

async function signOut() {
  await api("/console/logout", { method: "POST", body: {} }).catch(() => {});
  state.csrf = null;
  showLogin();
}

const PAGES = {
  "": () => overview(),
  requests: (id, params) => id ? request(id) : requests(params),
  approvals: () => approvals(),
  usage: (_, params) => usage(params),
  sessions: (id) => id ? session(id) : simpleList("Sessions", "/api/sessions", [["Session", (s) => s.sessionId], ["Agent", (s) => s.agent], ["Updated", (s) => ago(s.updatedAt)], ["Runs", (s) => s.runCount]], (s) => "#/sessions/" + s.sessionId),
  tasks: () => simpleList("Tasks", "/api/tasks", [["Task", (t) => t.taskId], ["Tool", (t) => t.tool], ["Decision", (t) => t.decision], ["Status", (t) => t.status], ["Updated", (t) => ago(t.updatedAt)]]),
  tools: () => tools(),
  workflows: (id) => workflows(id),
  memory: (id, params) => id ? memoryRecord(id) : memory(params),
  workspace: () => workspace(),
};

function route() {
  stopLive();
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  const [page, id] = parts;
  for (const link of document.querySelectorAll("#nav a")) {
    const target = link.getAttribute("href").slice(2);
    if (target === (page || "")) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  const open = PAGES[page || ""];
  if (!open) return show(el("h1", {}, "No such page"), el("p", {}, el("a", { href: "#/" }, "Back to the overview")));
  document.title = `${page ? page[0].toUpperCase() + page.slice(1) : "Overview"} · Keel`;
  open(id === undefined ? undefined : decodeURIComponent(id), params);
  document.getElementById("main").focus({ preventScroll: true });
}

// The approvals badge reads the pending approvals only (not the overview's figures).
async function pendingBadge() {
  try {
    const page = await api("/api/approvals?status=pending");
    const count = page.data.filter((a) => a.status === "pending").length;
    const badge = document.getElementById("pending-badge");
    badge.textContent = count;
    badge.hidden = !count;
  } catch (_) { /* shown by the page */ }
}

async function start() {
  document.getElementById("sign-out").addEventListener("click", signOut);
  const session = await api("/console/session");
  state.authRequired = session.authRequired;
  state.csrf = session.csrf || null;
  if (session.authRequired && !session.signedIn) return showLogin();
  document.getElementById("sign-out").hidden = !session.authRequired;
  enter();
}

// Signed in (or no sign-in needed): show the navigation, follow the address and keep the
// approvals badge current.
function enter() {
  document.getElementById("nav").hidden = false;
  if (!state.entered) {
    state.entered = true;
    window.addEventListener("hashchange", route);
    setInterval(() => { if (state.csrf || !state.authRequired) pendingBadge(); }, 5000);
  }
  pendingBadge();
  route();
}

document.addEventListener("DOMContentLoaded", () => { start().catch((e) => show(failure(e))); });
