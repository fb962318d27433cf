// The Keel web console: a small single-page app over the `/api` routes. Everything shown is
// built with DOM nodes and textContent (never HTML from data). Live views poll, or follow the
// run's event stream (SSE, resumed with Last-Event-ID after a dropped connection).
"use strict";

const state = { csrf: null, authRequired: false, timers: [], source: null };

// ---- helpers ------------------------------------------------------------------------------

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

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function when(ts) {
  if (!ts) return "";
  const date = new Date(ts);
  return isNaN(date) ? ts : date.toLocaleString();
}

function json(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

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

function every(ms, fn) {
  fn();
  state.timers.push(setInterval(fn, ms));
}

function stopLive() {
  state.timers.forEach(clearInterval);
  state.timers = [];
  if (state.source) { state.source.abort(); state.source = null; }
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function failure(error) {
  return el("p", { class: "error", role: "alert" }, error.message || String(error));
}

function statusCell(status) {
  return el("span", { class: "status-" + status }, status);
}

// ---- sign-in ------------------------------------------------------------------------------

function showLogin(message) {
  stopLive();
  document.getElementById("sign-out").hidden = true;
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

// ---- pages --------------------------------------------------------------------------------

async function overview() {
  const cards = el("div", { class: "cards" });
  const body = el("div", {});
  show(el("h1", {}, "Overview"), cards, body);
  every(3000, async () => {
    try {
      const [o, health] = await Promise.all([api("/api/overview"), api("/api/health")]);
      const card = (label, n, id) => el("div", { class: "card", id }, el("div", { class: "n" }, n), el("div", { class: "muted" }, label));
      const runs = Object.entries(o.runs || {});
      cards.replaceChildren(
        card("health", health.status, "health"),
        card("runs in flight", o.live, "live"),
        card("pending approvals", o.pendingApprovals, "pending"),
        card("error rate", (o.errorRate * 100).toFixed(1) + " %", "error-rate"),
        ...runs.map(([status, n]) => card(status, n)));
      body.replaceChildren(
        el("h2", {}, "Agents"), el("p", {}, o.agents.join(", ") || "none"),
        el("h2", {}, "Workflows"), el("p", {}, o.workflows.join(", ") || "none"),
        el("h2", {}, "Models"),
        el("ul", {}, (health.models || []).map((m) => el("li", {}, `${m.name} (${m.provider}): ${m.status}`))),
        el("h2", {}, "Latency (mean since the server started)"),
        el("table", { id: "latency" }, el("tbody", {},
          ...Object.entries(o.latency.models).map(([name, l]) => el("tr", {}, el("th", {}, `model ${name}`), el("td", {}, `${l.meanMs} ms over ${l.count} round(s)`))),
          ...Object.entries(o.latency.tools).map(([name, l]) => el("tr", {}, el("th", {}, `tool ${name}`), el("td", {}, `${l.meanMs} ms over ${l.count} call(s)`))))));
    } catch (e) { body.replaceChildren(failure(e)); }
  });
}

async function requests(params) {
  const form = el("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const query = new URLSearchParams();
    for (const [k, v] of data.entries()) if (v) query.set(k, v);
    location.hash = "#/requests" + (query.toString() ? "?" + query : "");
  } },
    el("label", {}, "Status", el("select", { name: "status" }, ["", "running", "waiting_approval", "completed", "failed", "cancelled", "interrupted", "queued"].map((s) => el("option", { value: s, selected: params.get("status") === s }, s || "any")))),
    el("label", {}, "Agent", el("input", { name: "agent", value: params.get("agent") || "", size: 14 })),
    el("label", {}, "Session", el("input", { name: "session", value: params.get("session") || "", size: 14 })),
    el("label", {}, "Since", el("input", { name: "since", value: params.get("since") || "", placeholder: "2026-11-25T00:00:00Z", size: 22 })),
    el("button", { type: "submit" }, "Filter"));
  const rows = el("tbody", {});
  const more = el("button", { type: "button", hidden: true }, "Load more");
  const error = el("div", {});
  show(el("h1", {}, "Requests"), form,
    el("table", { id: "requests" }, el("thead", {}, el("tr", {}, el("th", {}, "Request"), el("th", {}, "Status"), el("th", {}, "Agent"), el("th", { class: "hide-narrow" }, "Started"), el("th", { class: "hide-narrow" }, "Tokens"), el("th", { class: "hide-narrow" }, "Cost"))), rows),
    more, error);
  const base = new URLSearchParams(params);
  base.set("limit", "50");
  let cursor = null;
  const row = (run) => el("tr", { "data-id": run.requestId },
    el("td", { class: "mono" }, el("a", { href: "#/requests/" + run.requestId }, run.requestId)),
    el("td", {}, statusCell(run.status)),
    el("td", {}, run.agent),
    el("td", { class: "hide-narrow" }, when(run.startedAt)),
    el("td", { class: "hide-narrow" }, run.usage ? run.usage.totalTokens : 0),
    el("td", { class: "hide-narrow" }, costText(run.usage)));
  const load = async (append) => {
    const query = new URLSearchParams(base);
    if (append && cursor) query.set("cursor", cursor);
    try {
      const page = await api("/api/requests?" + query);
      if (!append) { rows.replaceChildren(...page.data.map(row)); }
      else rows.append(...page.data.map(row));
      if (!append || page.nextCursor) cursor = page.nextCursor || null;
      more.hidden = !cursor;
      error.replaceChildren();
    } catch (e) { error.replaceChildren(failure(e)); }
  };
  more.addEventListener("click", () => load(true));
  // The first page stays live; pages loaded with "Load more" are kept as they are.
  every(2000, () => { if (!rows.dataset.paged) load(false); });
  more.addEventListener("click", () => { rows.dataset.paged = "1"; });
}

function summary(event) {
  const e = event.event || {};
  switch (event.type) {
    case "runtime.request.started": return event.input;
    case "runtime.model.started": return `step ${event.step}, attempt ${event.attempt}: ${event.model}`;
    case "runtime.model.completed": return `step ${event.step}: ${tokensText(event.usage)}${event.usage.cost ? ", " + costText(event.usage) : ""}, ${event.latencyMs} ms, ${event.stopReason}` + (event.content ? ` — ${event.content}` : "");
    case "runtime.tool.guard": return `${event.tool}: ${event.decision}`;
    case "runtime.policy.decided": return `${event.tool}: ${event.decision} by ${event.source}` + (event.reason ? ` (${event.reason})` : "");
    case "runtime.hook.completed": return `${event.hook} on ${event.event}: ${event.outcome}`;
    case "runtime.hook.failed": return `${event.hook} on ${event.event} failed: ${event.error}`;
    case "runtime.approval.requested": return `${event.approval.tool} waits for a person (${event.approval.askedBy})`;
    case "runtime.approval.resolved": return `${event.status}` + (event.decidedBy ? ` by ${event.decidedBy}` : "") + (event.reason ? `: ${event.reason}` : "");
    case "runtime.adapter.event":
      if (e.phase === "agent.tool.start") return `${e.toolId} ${JSON.stringify(e.args)}`;
      if (e.phase === "agent.tool.result") return `${e.toolId} ${e.ok ? "ok" : "failed"} in ${e.durationMs} ms: ${e.output}`;
      if (e.phase === "agent.output.delta") return e.text;
      if (e.phase === "agent.handoff") return `to ${e.agent}: ${e.childRequestId}`;
      if (e.phase === "agent.progress") return `${e.kind}: ${JSON.stringify(e.data)}`;
      if (e.phase === "agent.log") return `${e.stream}: ${e.line}`;
      return e.phase;
    case "runtime.request.completed": return `${event.finishReason}, ${event.steps} steps, ${event.usage.totalTokens} tokens, ${event.durationMs} ms`;
    case "runtime.request.failed": return `${event.error.code}: ${event.error.message}`;
    case "runtime.workflow.node.started": return `${event.node} (${event.kind})` + (event.item !== undefined ? ` item ${event.item}` : "");
    case "runtime.workflow.node.completed": return `${event.node}: ${JSON.stringify(event.output)}`;
    case "runtime.workflow.node.failed": return `${event.node}: ${event.error}`;
    case "runtime.workflow.node.skipped": return event.node;
    default: return "";
  }
}

// The details a timeline row shows under its summary: a repaired call's arguments as a diff,
// a blocked call's issues.
function details(event) {
  if (event.type === "runtime.artifact.created") {
    const a = event.artifact;
    return el("div", {}, el("a", { href: `/api/artifacts/${encodeURIComponent(a.id)}`, target: "_blank", rel: "noopener" }, `${a.name} (${a.bytes} bytes)`));
  }
  if (event.type !== "runtime.tool.guard") return null;
  const parts = [];
  if (event.repairs && event.repairs.length) {
    parts.push(el("div", { class: "diff", "data-diff": event.callId },
      el("div", { class: "muted" }, "Repaired arguments:"),
      ...event.repairs.map((r) => el("div", { class: "mono" }, `${r.path || "/"} (${r.kind}): `,
        el("del", {}, JSON.stringify(r.from)), " → ", el("ins", {}, JSON.stringify(r.to))))));
  }
  if (event.issues && event.issues.length) {
    parts.push(el("ul", { class: "issues" }, event.issues.map((i) => el("li", {}, `${i.path || "/"}: ${i.message}`))));
  }
  return parts.length ? el("div", {}, parts) : null;
}

async function request(id) {
  const head = el("div", {});
  const actions = el("div", { class: "actions" });
  const tree = el("div", {});
  const timeline = el("ol", { class: "timeline", id: "timeline", "aria-live": "polite" });
  show(el("h1", {}, "Request ", el("span", { class: "mono" }, id)), head, actions, tree, el("h2", {}, "Events"), timeline);
  const message = el("span", { role: "status" });
  // Opens the run an action started (or stays, for a resume), or says why it failed.
  const go = (started, stay) => started
    .then((r) => { if (stay) { refresh(); } else { location.hash = "#/requests/" + r.requestId; } })
    .catch((e) => { message.replaceChildren(failure(e)); });
  // The actions are rebuilt only when the run's status changes, so a refresh (the run settling,
  // an approval event) keeps what the user is typing into the fork form.
  let actionsFor = null;
  const refresh = async () => {
    try {
      const run = await api(`/api/requests/${encodeURIComponent(id)}?tree=true`);
      const fields = [
        ["status", statusCell(run.status)], ["agent", run.agent], ["started", when(run.startedAt)],
        ["ended", when(run.endedAt)], ["tokens", run.usage ? tokensText(run.usage) : "0"],
        run.usage && run.usage.cost ? ["cost", costText(run.usage)] : null,
        ["input", el("pre", {}, run.input)],
        run.output !== undefined ? ["output", el("pre", { id: "output" }, run.output)] : null,
        run.error ? ["error", el("pre", { class: "error" }, `${run.error.code}: ${run.error.message}`)] : null,
        run.links && run.links.parentId ? ["parent", el("a", { href: "#/requests/" + run.links.parentId, class: "mono" }, run.links.parentId)] : null,
      ].filter(Boolean);
      head.replaceChildren(el("table", {}, el("tbody", {}, fields.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))))));
      const ended = ["completed", "failed", "cancelled", "interrupted"].includes(run.status);
      if (actionsFor !== run.status) actions.replaceChildren(...[
        ended ? null : el("button", { class: "danger", type: "button", onclick: () => api(`/api/requests/${id}/cancel`, { method: "POST", body: {} }).then(refresh) }, "Cancel"),
        ended ? el("button", { type: "button", onclick: () => go(api(`/api/requests/${id}/retry`, { method: "POST", body: {} })) }, "Retry") : null,
        run.status === "interrupted" ? el("button", { type: "button", onclick: () => go(api(`/api/requests/${id}/resume`, { method: "POST", body: {} }), id) }, "Resume") : null,
        ended ? el("form", { class: "actions", onsubmit: (event) => {
          event.preventDefault();
          const at = Number(new FormData(event.target).get("at"));
          go(api(`/api/requests/${id}/fork`, { method: "POST", body: { atSeq: at } }));
        } }, el("label", {}, "Fork after event", el("input", { name: "at", type: "number", min: 1, required: true, size: 5 })), el("button", { type: "submit" }, "Fork")) : null,
        message,
      ].filter(Boolean));
      actionsFor = run.status;
      const branch = (node) => el("li", {}, el("a", { href: "#/requests/" + node.requestId, class: "mono" }, node.requestId), ` ${node.agent} `, statusCell(node.status),
        node.children.length ? el("ul", { class: "tree" }, node.children.map(branch)) : null);
      tree.replaceChildren(...(run.children && run.children.length ? [el("h2", {}, "Runs it started"), el("ul", { class: "tree" }, run.children.map(branch))] : []));
      return ended;
    } catch (e) { head.replaceChildren(failure(e)); return true; }
  };
  await refresh();
  // Rows are added in batches, once per frame, so a long log never blocks the page.
  let queue = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const batch = queue.splice(0, 300);
    const fragment = document.createDocumentFragment();
    for (const event of batch) {
      if (event.type === "runtime.progress.narration") {
        fragment.append(el("li", { class: "narration", "data-type": event.type },
          el("span", {}), el("span", {}), el("div", { class: "muted" }, "» " + event.message)));
        continue;
      }
      fragment.append(el("li", { "data-type": event.type, "data-seq": event.seq },
        el("span", { class: "muted mono" }, event.seq),
        el("span", { class: "muted when" }, new Date(event.ts).toLocaleTimeString()),
        el("div", {}, el("div", { class: "type" }, event.type), el("div", { class: "mono" }, summary(event)), details(event))));
    }
    timeline.append(fragment);
    if (queue.length) { scheduled = true; requestAnimationFrame(flush); }
  };
  const stream = new AbortController();
  state.source = stream;
  follow(id, stream.signal, (event) => {
    queue.push(event);
    if (!scheduled) { scheduled = true; requestAnimationFrame(flush); }
    if (/runtime\.approval\./.test(event.type)) refresh();
    if (/runtime\.request\.(completed|failed|cancelled|interrupted)/.test(event.type)) settle();
  });
  // The run's record is updated just after its terminal event is stored: read it until it
  // says the run ended (output, status, usage), briefly.
  async function settle() {
    for (let tries = 0; tries < 50; tries++) {
      if (await refresh()) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

// Follows a run's event stream (SSE over fetch, so every event type arrives and a dropped
// connection resumes after the last event seen, with Last-Event-ID) until its final event.
async function follow(id, signal, onEvent) {
  const final = /^runtime\.request\.(completed|failed|cancelled)$/;
  let last = 0;
  let done = false;
  while (!done && !signal.aborted) {
    try {
      const headers = { "Accept": "text/event-stream" };
      if (last) headers["Last-Event-ID"] = String(last);
      const response = await fetch(`/api/requests/${encodeURIComponent(id)}/events?narration=true`, { headers, credentials: "same-origin", signal });
      if (!response.ok) throw new ApiError(response.status, response.statusText);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done: closed } = await reader.read();
        if (closed) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (!data) continue;
          const event = JSON.parse(data);
          // Narration follows its source event and carries its seq; it is never stored.
          if (event.type === "runtime.progress.narration") { onEvent(event); continue; }
          if (event.seq <= last) continue;
          last = event.seq;
          onEvent(event);
          if (final.test(event.type)) done = true;
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status < 500) return;
    }
    if (!done && !signal.aborted) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function approvals() {
  const list = el("div", { id: "approvals" });
  show(el("h1", {}, "Approvals"), list);
  every(1500, async () => {
    try {
      const page = await api("/api/approvals?status=pending");
      const pending = page.data.filter((a) => a.status === "pending");
      if (!pending.length) { list.replaceChildren(el("p", { class: "muted" }, "Nothing waits for a decision.")); return; }
      // Keep a row whose reason is being typed; drop those decided elsewhere.
      const ids = new Set(pending.map((a) => a.approvalId));
      for (const row of [...list.children]) if (!ids.has(row.dataset.id)) row.remove();
      for (const a of pending) {
        if (list.querySelector(`[data-id="${CSS.escape(a.approvalId)}"]`)) continue;
        const reason = el("input", { name: "reason", placeholder: "reason (optional)", "aria-label": "Reason" });
        const decide = (decision, scope) => api(`/api/approvals/${a.approvalId}/${decision}`, { method: "POST", body: scope ? { reason: reason.value || undefined, scope } : { reason: reason.value || undefined } })
          .then(() => card.remove()).catch((e) => card.append(failure(e)));
        const card = el("section", { class: "card", "data-id": a.approvalId },
          el("h2", {}, a.tool, " ", el("span", { class: "muted" }, `asked by ${a.askedBy}`)),
          a.askReason ? el("p", {}, a.askReason) : null,
          el("pre", {}, json(a.arguments)),
          el("p", { class: "muted" }, "Request ", el("a", { href: "#/requests/" + a.requestId, class: "mono" }, a.requestId),
            a.rootRequestId ? [" (root ", el("a", { href: "#/requests/" + a.rootRequestId, class: "mono" }, a.rootRequestId), ")"] : null,
            " · ", when(a.createdAt)),
          el("div", { class: "actions" },
            el("button", { class: "primary", type: "button", onclick: () => decide("approve") }, "Approve"),
            el("button", { type: "button", onclick: () => decide("approve", "session") }, "Approve for the session"),
            reason,
            el("button", { class: "danger", type: "button", onclick: () => decide("deny") }, "Deny")));
        list.append(card);
      }
    } catch (e) { list.replaceChildren(failure(e)); }
  });
}

async function simpleList(title, path, columns, link) {
  const body = el("tbody", {});
  show(el("h1", {}, title), el("table", {}, el("thead", {}, el("tr", {}, columns.map(([label]) => el("th", {}, label)))), body));
  try {
    const page = await api(path);
    const items = Array.isArray(page) ? page : (page.data || []);
    body.replaceChildren(...items.map((item) => el("tr", {}, columns.map(([, value], i) => {
      const text = value(item);
      return el("td", { class: i === 0 ? "mono" : "" }, i === 0 && link ? el("a", { href: link(item) }, text) : text);
    }))));
    if (!items.length) body.append(el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, "None.")));
  } catch (e) { body.replaceChildren(el("tr", {}, el("td", {}, failure(e)))); }
}

// The tools of the default agent's inventory with their usage: calls, errors, repairs,
// blocks and latency, from the stored runs.
async function tools() {
  const body = el("tbody", {});
  show(el("h1", {}, "Tools"), el("table", { id: "tools" }, el("thead", {}, el("tr", {},
    ["Tool", "Description", "Calls", "Errors", "Repairs", "Blocks", "p50 / p99"].map((h, i) => el("th", { class: i > 1 ? "hide-narrow" : "" }, h)))), body));
  try {
    const [list, stats] = await Promise.all([api("/api/tools"), api("/api/tools/stats")]);
    const by = new Map(stats.data.map((s) => [s.tool, s]));
    body.replaceChildren(...list.data.map((t) => {
      const s = by.get(t.name) || { calls: 0, errors: 0, repairs: 0, blocks: 0, latencyP50Ms: 0, latencyP99Ms: 0 };
      const cell = (v) => el("td", { class: "hide-narrow" }, v);
      return el("tr", {}, el("td", { class: "mono" }, t.name), el("td", {}, t.description || ""),
        cell(s.calls), cell(s.errors), cell(s.repairs), cell(s.blocks), cell(`${s.latencyP50Ms} / ${s.latencyP99Ms} ms`));
    }));
  } catch (e) { body.replaceChildren(el("tr", {}, el("td", {}, failure(e)))); }
}

async function session(id) {
  show(el("h1", {}, "Session ", el("span", { class: "mono" }, id)));
  try {
    const s = await api(`/api/sessions/${encodeURIComponent(id)}`);
    const messages = s.messages || s.transcript || [];
    document.getElementById("main").append(el("ol", { class: "timeline" }, messages.map((m) => {
      const message = m.message || m;
      return el("li", {}, el("span", { class: "muted" }, m.seq || ""), el("span", {}, message.role), el("pre", {}, message.content || json(message.toolCalls || "")));
    })));
  } catch (e) { document.getElementById("main").append(failure(e)); }
}

async function workflows() {
  const main = el("div", {});
  show(el("h1", {}, "Workflows"), main);
  try {
    const page = await api("/api/workflows");
    for (const w of page.data) {
      const detail = await api(`/api/workflows/${encodeURIComponent(w.name)}`);
      main.append(el("section", {}, el("h2", {}, w.name), el("p", {}, w.description || ""),
        el("p", { class: "muted" }, `${w.nodes} nodes` + (w.phases.length ? `, phases: ${w.phases.join(" → ")}` : "")),
        el("details", {}, el("summary", {}, "Graph (Mermaid)"), el("pre", {}, detail.mermaid))));
    }
    if (!page.data.length) main.append(el("p", { class: "muted" }, "No workflows."));
  } catch (e) { main.append(failure(e)); }
}

async function workspace() {
  show(el("h1", {}, "Workspace"));
  try {
    const inventory = await api("/api/inventory");
    document.getElementById("main").append(el("pre", { id: "inventory" }, json(inventory)));
  } catch (e) { document.getElementById("main").append(failure(e)); }
}

// ---- routing ------------------------------------------------------------------------------

function route() {
  stopLive();
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  for (const link of document.querySelectorAll("nav a")) {
    const target = link.getAttribute("href").slice(1);
    const current = target === "/" ? parts.length === 0 : path.startsWith(target);
    if (current) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
  }
  const [page, id] = parts;
  if (!page) return overview();
  if (page === "requests" && id) return request(decodeURIComponent(id));
  if (page === "requests") return requests(params);
  if (page === "approvals") return approvals();
  if (page === "sessions" && id) return session(decodeURIComponent(id));
  if (page === "sessions") return simpleList("Sessions", "/api/sessions", [["Session", (s) => s.sessionId], ["Agent", (s) => s.agent], ["Updated", (s) => when(s.updatedAt)], ["Runs", (s) => s.runCount]], (s) => "#/sessions/" + s.sessionId);
  if (page === "tasks") return simpleList("Tasks", "/api/tasks", [["Task", (t) => t.taskId], ["Tool", (t) => t.tool], ["Decision", (t) => t.decision], ["Status", (t) => t.status], ["Updated", (t) => when(t.updatedAt)]]);
  if (page === "tools") return tools();
  if (page === "memory") return simpleList("Memory", "/api/memory", [["Record", (r) => r.id], ["Namespace", (r) => r.namespace], ["Kind", (r) => r.kind], ["Text", (r) => r.text]]);
  if (page === "workflows") return workflows();
  if (page === "workspace") return workspace();
  show(el("p", {}, "No such page."));
}

async function pendingBadge() {
  try {
    const o = await api("/api/overview");
    const badge = document.getElementById("pending-badge");
    badge.textContent = o.pendingApprovals;
    badge.hidden = !o.pendingApprovals;
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

// Signed in (or no sign-in needed): follow the address and keep the approvals badge current.
function enter() {
  if (!state.entered) {
    state.entered = true;
    window.addEventListener("hashchange", route);
    setInterval(() => { if (state.csrf || !state.authRequired) pendingBadge(); }, 5000);
  }
  pendingBadge();
  route();
}

document.addEventListener("DOMContentLoaded", () => { start().catch((e) => show(failure(e))); });
