// The Keel web console, shared parts: DOM and SVG builders, the API client, formatting of
// times, tokens and money, live refresh, and the small SVG charts. Everything shown is built
// with DOM nodes and textContent (never HTML from data). Loaded first; the page scripts
// (pages.js, run.js, graph.js) use these, and app.js routes between them.
"use strict";

const state = { csrf: null, authRequired: false, timers: [], source: null, entered: false };

// ---- building nodes -----------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  return fill(node, attrs, children);
}

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Work too large for one task is spread over animation frames. Every piece of such work on
// the page (rows of a timeline, bars of a waterfall, nodes of a graph) shares one budget of
// script time per frame. The browser's style, layout and paint of what a frame added come on
// top and cost more than making it, so the budget follows their measured share: a frame's
// script and rendering together aim at FRAME_TARGET_MS, well inside the 50 ms long-task limit,
// and a slow or busy machine just adds less per frame.
const FRAME_TARGET_MS = 10;
const frameJobs = [];
const frame = { asked: false, budget: 4, script: 0, rendered: 0 };
const afterRendering = new MessageChannel();
afterRendering.port1.onmessage = () => {
  // Posted at the end of the frame's script: it runs once the frame is rendered.
  const rendering = performance.now() - frame.rendered;
  const share = frame.script / Math.max(frame.script + rendering, 0.1);
  frame.budget = Math.min(6, Math.max(0.5, FRAME_TARGET_MS * share));
};

// Runs `step` once per unit of work, in frames, until it answers false.
function inFrames(step) {
  frameJobs.push(step);
  if (!frame.asked) { frame.asked = true; requestAnimationFrame(runFrame); }
}

function runFrame() {
  frame.asked = false;
  const started = performance.now();
  // Jobs take turns, one unit each, so a long one does not starve the others.
  while (frameJobs.length && performance.now() - started < frame.budget) {
    const step = frameJobs.shift();
    if (step()) frameJobs.push(step);
  }
  frame.rendered = performance.now();
  frame.script = frame.rendered - started;
  afterRendering.port2.postMessage(null);
  if (frameJobs.length) { frame.asked = true; requestAnimationFrame(runFrame); }
}

// Appends `items` to `parent` in frames, each made into a node by `make` (the items
// themselves when they are nodes); while it fills, `parent` carries `data-filling`.
// Appending anew to the same parent stops the previous fill.
function appendInFrames(parent, items, make = (item) => item) {
  const token = {};
  parent.appending = token;
  let at = 0;
  parent.toggleAttribute("data-filling", items.length > 0);
  if (!items.length) return;
  inFrames(() => {
    if (parent.appending !== token) return false;
    parent.append(make(items[at++]));
    const more = at < items.length;
    if (!more) parent.removeAttribute("data-filling");
    return more;
  });
}

function show(...nodes) {
  document.getElementById("main").replaceChildren(...nodes);
}

function failure(error) {
  return el("p", { class: "error", role: "alert" }, error.message || String(error));
}

function statusCell(status) {
  return el("span", { class: "status status-" + status }, status.replace("_", " "));
}

// A table from rows of cells; `head` names the columns (a column whose name starts with "~"
// is hidden on narrow screens).
function table(attrs, head, rows) {
  const narrow = head.map((h) => h.startsWith("~"));
  return el("div", { class: "scroll" }, el("table", attrs,
    el("thead", {}, el("tr", {}, head.map((h, i) => el("th", { class: narrow[i] ? "hide-narrow" : null }, h.replace(/^~/, ""))))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) => el("td", { class: narrow[i] ? "hide-narrow" : null }, c)))))));
}

// ---- formatting ---------------------------------------------------------------------------

// A usage's tokens: the total, and what part came from or went to the cache or was reasoning.
function tokensText(usage) {
  const parts = [`${usage.promptTokens} in`, `${usage.completionTokens} out`];
  if (usage.cacheReadTokens) parts.push(`${usage.cacheReadTokens} cached`);
  if (usage.cacheWriteTokens) parts.push(`${usage.cacheWriteTokens} to cache`);
  if (usage.reasoningTokens) parts.push(`${usage.reasoningTokens} reasoning`);
  return `${usage.totalTokens} tokens (${parts.join(", ")})`;
}

// A usage's cost at the model's declared prices, exactly as recorded, or a dash.
function costText(usage) {
  return usage && usage.cost ? `${usage.cost.amount} ${usage.cost.currency}` : "—";
}

// A duration: "840 ms", "3.2 s", "4 min 05 s", "2 h 10 min".
function duration(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor(s / 60) % 60).padStart(2, "0")} min`;
}

function when(ts) {
  if (!ts) return "";
  const date = new Date(ts);
  return isNaN(date) ? ts : date.toLocaleString();
}

// A time of day to the millisecond: 14:03:07.120.
function clock(ts) {
  const d = new Date(ts);
  if (isNaN(d)) return ts || "";
  const two = (n) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

// "5 s ago", "3 min ago", "2 h ago", "4 d ago".
function ago(ts) {
  const ms = Date.now() - new Date(ts).getTime();
  if (isNaN(ms)) return "";
  if (ms < 60_000) return `${Math.max(0, Math.round(ms / 1000))} s ago`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min ago`;
  if (ms < 86_400_000) return `${Math.round(ms / 3_600_000)} h ago`;
  return `${Math.round(ms / 86_400_000)} d ago`;
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function firstLine(text, max = 90) {
  const line = String(text || "").split("\n").find((l) => l.trim()) || "";
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

// ---- the API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const headers = { "Accept": "application/json" };
  const init = { method: options.method || "GET", headers, credentials: "same-origin" };
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  if (init.method !== "GET" && state.csrf) headers["X-Keel-CSRF"] = state.csrf;
  const response = await fetch(path, init);
  if (response.status === 204) return null;
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    if (response.status === 401 && state.authRequired) { state.csrf = null; showLogin(); }
    throw new ApiError(response.status, (body.error && body.error.message) || response.statusText);
  }
  return body;
}

// Calls `fn` now and every `ms` while the page stays (the timers stop on navigation); a
// call still running when the next is due is not doubled.
function every(ms, fn) {
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try { await fn(); } finally { busy = false; }
  };
  tick();
  state.timers.push(setInterval(tick, ms));
}

function stopLive() {
  state.timers.forEach(clearInterval);
  state.timers = [];
  if (state.source) { state.source.abort(); state.source = null; }
}

// Decides a pending approval: approve (for this call or the session) or deny, with an
// optional reason typed beside the buttons. `done` runs once the decision is stored.
function decisionButtons(approval, done) {
  const reason = el("input", { name: "reason", placeholder: "reason (optional)", "aria-label": "Reason" });
  const message = el("span", { role: "status" });
  const decide = (decision, scope) => {
    const body = { reason: reason.value || undefined };
    if (scope) body.scope = scope;
    api(`/api/approvals/${encodeURIComponent(approval.approvalId)}/${decision}`, { method: "POST", body })
      .then(() => done(decision)).catch((e) => message.replaceChildren(failure(e)));
  };
  return el("div", { class: "actions" },
    el("button", { class: "primary", type: "button", onclick: () => decide("approve") }, "Approve"),
    el("button", { type: "button", onclick: () => decide("approve", "session") }, "Approve for session"),
    reason,
    el("button", { class: "danger", type: "button", onclick: () => decide("deny") }, "Deny"),
    message);
}

// ---- charts -------------------------------------------------------------------------------

// Stacked columns: `bars` is [{label, parts: [{value, cls, name}]}]; the tallest column fills
// the height. Each column has a title (hover) with its label and parts.
function columns(bars, { height = 120, unit = "", id } = {}) {
  const width = Math.max(bars.length * 12, 240);
  const step = width / Math.max(bars.length, 1);
  const top = Math.max(1, ...bars.map((b) => b.parts.reduce((s, p) => s + p.value, 0)));
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 16}`, class: "chart", role: "img", id, preserveAspectRatio: "none" });
  bars.forEach((bar, i) => {
    let y = height;
    const sum = bar.parts.reduce((s, p) => s + p.value, 0);
    const group = svg("g", { "data-label": bar.label, "data-total": sum }, svg("title", {}, `${bar.label}: ` + bar.parts.map((p) => `${p.value}${unit} ${p.name}`).join(", ")));
    for (const part of bar.parts) {
      if (!part.value) continue;
      const h = (part.value / top) * height;
      y -= h;
      group.append(svg("rect", { x: i * step + 1, y, width: Math.max(step - 2, 1), height: h, class: part.cls }));
    }
    chart.append(group);
  });
  chart.append(svg("line", { x1: 0, x2: width, y1: height + 0.5, y2: height + 0.5, class: "axis" }));
  const label = (i, anchor) => bars[i] && chart.append(svg("text", { x: i * step + (anchor === "end" ? step : 0), y: height + 13, "text-anchor": anchor, class: "tick" }, bars[i].label));
  label(0, "start");
  label(bars.length - 1, "end");
  const figure = el("figure", { class: "figure" }, chart);
  figure.dataset.max = String(top);
  return figure;
}

// Horizontal bars comparing a few values (latency percentiles): [{label, values: [{name, value}]}].
function ranges(rows, { unit = " ms" } = {}) {
  const top = Math.max(1, ...rows.flatMap((r) => r.values.map((v) => v.value)));
  return el("div", { class: "ranges" }, rows.map((row) => el("div", { class: "range" },
    el("span", { class: "range-label mono" }, row.label),
    (() => {
      const chart = svg("svg", { viewBox: "0 0 100 12", preserveAspectRatio: "none", class: "range-bar", role: "img" },
        svg("title", {}, row.values.map((v) => `${v.name} ${v.value}${unit}`).join(", ")));
      row.values.slice().reverse().forEach((v, i) => chart.append(svg("rect", { x: 0, y: 1 + i, width: Math.max((v.value / top) * 100, 0.5), height: 10 - 2 * i, class: "q" + (row.values.length - 1 - i) })));
      return chart;
    })(),
    el("span", { class: "range-text" }, row.values.map((v) => `${v.name} ${v.value}${unit}`).join(" · ")))));
}

function legend(items) {
  return el("ul", { class: "legend" }, items.map(([cls, name]) => el("li", {}, el("span", { class: "swatch " + cls }), name)));
}
