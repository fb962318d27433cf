// The console's list and summary pages: overview, requests, approvals, usage, tools, memory,
// sessions, tasks and the workspace inventory.
"use strict";

// ---- overview -----------------------------------------------------------------------------

async function overview() {
  const cards = el("div", { class: "cards" });
  const charts = el("div", { class: "panels" });
  const recent = el("div", {});
  const lists = el("div", {});
  show(el("h1", {}, "Overview"), cards, charts, el("h2", {}, "Recent runs"), recent, lists);
  every(3000, async () => {
    try {
      const [o, health, runs] = await Promise.all([api("/api/overview"), api("/api/health"), api("/api/requests?limit=8")]);
      const card = (label, n, id, cls) => el("a", { class: "card " + (cls || ""), id, href: id === "pending" ? "#/approvals" : null }, el("div", { class: "n" }, n), el("div", { class: "muted" }, label));
      const hour = o.lastHour;
      cards.replaceChildren(
        card("health", health.status, "health", "health-" + health.status),
        card("runs in flight", o.live, "live"),
        card("pending approvals", o.pendingApprovals, "pending", o.pendingApprovals ? "attention" : ""),
        card("runs in the last hour", hour.started, "last-hour"),
        card("error rate, last hour", (hour.errorRate * 100).toFixed(1) + " %", "error-rate", hour.failed ? "bad" : ""),
        ...(o.cluster ? [card("replicas", o.cluster.replicas, "replicas"), card("queue depth", o.cluster.queueDepth, "queue-depth")] : []));
      const perMinute = columns(hour.minutes.map((m) => ({ label: m.minute.slice(11), parts: [
        { value: m.completed, cls: "c-ok", name: "completed" },
        { value: m.failed, cls: "c-bad", name: "failed" },
        { value: m.started - m.completed - m.failed, cls: "c-other", name: "other" }] })), { id: "runs-per-minute" });
      const errors = columns(hour.minutes.map((m) => {
        const ended = m.completed + m.failed;
        const rate = ended ? Math.round((m.failed / ended) * 100) : 0;
        return { label: m.minute.slice(11), parts: [{ value: rate, cls: "c-bad", name: "% failed" }] };
      }), { id: "error-rate-chart", unit: "" });
      const latency = (group) => Object.entries(o.latency[group]).map(([name, l]) => ({ label: name, values: [{ name: "p50", value: l.p50Ms }, { name: "p95", value: l.p95Ms }, { name: "p99", value: l.p99Ms }] }));
      const models = latency("models");
      const tools = latency("tools");
      charts.replaceChildren(
        el("section", { class: "panel" }, el("h2", {}, "Runs per minute, last hour"), perMinute, legend([["c-ok", "completed"], ["c-bad", "failed"], ["c-other", "running or other"]])),
        el("section", { class: "panel" }, el("h2", {}, "Failed runs per minute, % of ended"), errors),
        el("section", { class: "panel", id: "latency" }, el("h2", {}, "Model latency"), models.length ? ranges(models) : el("p", { class: "muted" }, "No model rounds since the server started."),
          el("h2", {}, "Tool latency"), tools.length ? ranges(tools) : el("p", { class: "muted" }, "No tool calls since the server started."),
          el("p", { class: "muted small" }, "Percentiles of the latest 512 calls since the server started.")));
      recent.replaceChildren(requestTable(runs.data));
      lists.replaceChildren(
        el("h2", {}, "Models"),
        el("ul", {}, (health.models || []).map((m) => el("li", {}, `${m.name} (${m.provider}): ${m.status}`))),
        el("h2", {}, "Agents"), el("p", {}, o.agents.join(", ") || "none"),
        el("h2", {}, "Workflows"), el("p", {}, o.workflows.length ? o.workflows.map((w, i) => [i ? ", " : "", el("a", { href: "#/workflows/" + encodeURIComponent(w) }, w)]) : "none"));
    } catch (e) { recent.replaceChildren(failure(e)); }
  });
}

// ---- requests -----------------------------------------------------------------------------

function requestTable(runs, attrs) {
  return table(attrs || {}, ["Request", "Status", "Agent", "Input", "~Started", "~Duration", "~Tokens", "~Cost"], runs.map((run) => [
    el("a", { href: "#/requests/" + run.requestId, class: "mono" }, run.requestId),
    statusCell(run.status), run.agent, el("span", { class: "input-line" }, firstLine(run.input)),
    el("span", { title: when(run.startedAt) }, ago(run.startedAt)),
    run.endedAt ? duration(new Date(run.endedAt) - new Date(run.startedAt)) : el("span", { class: "muted" }, "running"),
    run.usage ? run.usage.totalTokens : 0, costText(run.usage)]));
}

const SINCE = [["", "any time"], ["15m", "last 15 min"], ["1h", "last hour"], ["24h", "last 24 h"], ["7d", "last 7 days"], ["exact", "since…"]];
const SINCE_MS = { "15m": 15 * 60_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 };

async function requests(params) {
  const range = params.get("range") || (params.get("since") ? "exact" : "");
  const exact = el("input", { name: "since", type: "datetime-local", step: 1, value: (params.get("since") || "").replace(/Z$/, "").slice(0, 19), hidden: range !== "exact", "aria-label": "Since (exact time)" });
  const select = el("select", { name: "range", onchange: () => { exact.hidden = select.value !== "exact"; } },
    SINCE.map(([v, label]) => el("option", { value: v, selected: v === range }, label)));
  const form = el("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v && k !== "since") query.set(k, v);
    if (select.value === "exact" && exact.value) query.set("since", new Date(exact.value).toISOString());
    location.hash = "#/requests" + (query.toString() ? "?" + query : "");
  } },
    el("label", {}, "Status", el("select", { name: "status" }, ["", "running", "waiting_approval", "completed", "failed", "cancelled", "interrupted", "queued"].map((s) => el("option", { value: s, selected: params.get("status") === s }, s || "any")))),
    el("label", {}, "Agent", el("input", { name: "agent", value: params.get("agent") || "", size: 14 })),
    el("label", {}, "Session", el("input", { name: "session", value: params.get("session") || "", size: 14 })),
    el("label", {}, "Since", select, exact),
    el("button", { type: "submit" }, "Filter"));
  const body = el("div", { id: "requests" });
  const more = el("button", { type: "button", hidden: true }, "Load more");
  const error = el("div", {});
  show(el("h1", {}, "Requests"), form, body, more, error);
  const base = new URLSearchParams();
  for (const key of ["status", "agent", "session"]) if (params.get(key)) base.set(key, params.get(key));
  base.set("limit", "50");
  let cursor = null;
  let loaded = [];
  const load = async (append) => {
    const query = new URLSearchParams(base);
    if (SINCE_MS[range]) query.set("since", new Date(Date.now() - SINCE_MS[range]).toISOString());
    else if (params.get("since")) query.set("since", params.get("since"));
    if (append && cursor) query.set("cursor", cursor);
    try {
      const page = await api("/api/requests?" + query);
      loaded = append ? loaded.concat(page.data) : page.data;
      body.replaceChildren(loaded.length ? requestTable(loaded) : el("p", { class: "muted" }, "No requests match."));
      if (!append || page.nextCursor) cursor = page.nextCursor || null;
      more.hidden = !cursor;
      error.replaceChildren();
    } catch (e) { error.replaceChildren(failure(e)); }
  };
  let paged = false;
  more.addEventListener("click", () => { paged = true; load(true); });
  // The first page stays live; once more pages are loaded they are kept as they are.
  every(2000, () => paged ? null : load(false));
}

// ---- approvals ----------------------------------------------------------------------------

async function approvals() {
  const list = el("div", { id: "approvals" });
  show(el("h1", {}, "Approvals"), list);
  every(1500, async () => {
    try {
      const page = await api("/api/approvals?status=pending");
      const pending = page.data.filter((a) => a.status === "pending");
      const ids = new Set(pending.map((a) => a.approvalId));
      for (const row of [...list.children]) if (!ids.has(row.dataset.id)) row.remove();
      if (!pending.length) { list.replaceChildren(el("p", { class: "muted" }, "Nothing waits for a decision.")); return; }
      for (const empty of list.querySelectorAll("p.muted")) empty.remove();
      for (const a of pending) {
        if (list.querySelector(`[data-id="${CSS.escape(a.approvalId)}"]`)) continue;
        const card = el("section", { class: "card", "data-id": a.approvalId },
          el("h2", {}, a.tool, " ", el("span", { class: "muted" }, `asked by ${a.askedBy}`)),
          a.askReason ? el("p", {}, a.askReason) : null,
          el("pre", {}, json(a.arguments)),
          el("p", { class: "muted" }, "Request ", el("a", { href: "#/requests/" + a.requestId, class: "mono" }, a.requestId),
            a.rootRequestId ? [" (root ", el("a", { href: "#/requests/" + a.rootRequestId, class: "mono" }, a.rootRequestId), ")"] : null,
            " · ", ago(a.createdAt)),
          decisionButtons(a, () => card.remove()));
        list.append(card);
      }
    } catch (e) { list.replaceChildren(failure(e)); }
  });
}

// How many of the period's latest runs the top runs by cost are chosen from.
const TOP_OF = 200;

// ---- usage --------------------------------------------------------------------------------

async function usage(params) {
  const days = Number(params.get("days") || 14);
  const measure = params.get("measure") === "tokens" ? "tokens" : "cost";
  const controls = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const data = new FormData(e.target);
    location.hash = `#/usage?days=${data.get("days")}&measure=${data.get("measure")}`;
  } },
    el("label", {}, "Days", el("select", { name: "days" }, [7, 14, 30, 90].map((d) => el("option", { value: d, selected: d === days }, d)))),
    el("label", {}, "Show", el("select", { name: "measure" }, [["cost", "cost"], ["tokens", "tokens"]].map(([v, l]) => el("option", { value: v, selected: v === measure }, l)))),
    el("button", { type: "submit" }, "Show"));
  const body = el("div", {});
  show(el("h1", {}, "Usage"), controls, body);
  try {
    const since = new Date(Date.now() - (days - 1) * 86_400_000).toISOString().slice(0, 10) + "T00:00:00.000Z";
    const [byDay, byAgent, byKey, top, inventory] = await Promise.all([
      api(`/api/usage?by=day,agent&since=${since}`), api(`/api/usage?by=agent&since=${since}`),
      api(`/api/usage?by=key&since=${new Date().toISOString().slice(0, 10)}T00:00:00.000Z`),
      api(`/api/requests?since=${since}&limit=${TOP_OF}`), api("/api/inventory")]);
    const amount = (u) => measure === "cost" ? (u.cost ? Number(u.cost.amount) : 0) : u.totalTokens;
    const agents = [...new Set(byDay.data.map((r) => r.groups[1]))];
    const dayList = [];
    for (let i = days - 1; i >= 0; i--) dayList.push(new Date(Date.now() - i * 86_400_000).toISOString().slice(0, 10));
    const currency = (byAgent.data.find((r) => r.usage.cost) || { usage: { cost: { currency: "" } } }).usage.cost.currency;
    const chart = columns(dayList.map((day) => ({ label: day.slice(5), parts: agents.map((agent, i) => {
      const row = byDay.data.find((r) => r.groups[0] === day && r.groups[1] === agent);
      return { value: row ? amount(row.usage) : 0, cls: "c-" + (i % 6), name: agent };
    }) })), { id: "usage-chart", unit: measure === "cost" ? ` ${currency}` : " tokens" });
    const agentRows = byAgent.data.map((r) => [r.group, r.runs, r.usage.totalTokens, costText(r.usage)]);
    // Each key's spend today against its daily budget.
    const keys = inventory.apiKeys || [];
    const spentBy = new Map(byKey.data.map((r) => [r.group, r.usage]));
    const budgetRows = keys.filter((k) => k.budget).map((k) => {
      const spent = spentBy.get(k.name);
      const used = spent && spent.cost ? Number(spent.cost.amount) : 0;
      const limit = Number(String(k.budget).split(" ")[0]);
      const share = limit ? Math.min(used / limit, 1) : 0;
      const meter = el("meter", { min: 0, max: 1, value: share, low: 0.7, high: 0.9, optimum: 0 });
      return [k.name, `${used} of ${k.budget}`, meter, `${Math.round(share * 100)} %`];
    });
    const costly = top.data.filter((r) => r.usage && r.usage.cost).sort((a, b) => Number(b.usage.cost.amount) - Number(a.usage.cost.amount)).slice(0, 10);
    body.replaceChildren(
      el("section", { class: "panel" }, el("h2", {}, measure === "cost" ? `Cost per day by agent (${currency || "no pricing declared"})` : "Tokens per day by agent"), chart, legend(agents.map((a, i) => ["c-" + (i % 6), a]))),
      el("h2", {}, "By agent"), table({ id: "usage-agents" }, ["Agent", "Runs", "Tokens", "Cost"], agentRows),
      el("h2", {}, "Budgets per API key, today (UTC)"),
      budgetRows.length ? table({ id: "budgets" }, ["Key", "Spent", "~Budget", "Share"], budgetRows) : el("p", { class: "muted" }, "No API key has a daily budget."),
      el("h2", {}, "Top runs by cost", top.nextCursor ? el("span", { class: "muted" }, ` among the latest ${TOP_OF}`) : null),
      costly.length ? table({ id: "top-runs" }, ["Request", "Agent", "Input", "Cost", "~Tokens"], costly.map((r) => [
        el("a", { href: "#/requests/" + r.requestId, class: "mono" }, r.requestId), r.agent, el("span", { class: "input-line" }, firstLine(r.input, 60)), costText(r.usage), r.usage.totalTokens])) : el("p", { class: "muted" }, "No priced runs in this period."));
  } catch (e) { body.replaceChildren(failure(e)); }
}

// ---- tools --------------------------------------------------------------------------------

// Every agent's and workflow's tools with their usage from the stored runs; a tool never
// called says so.
async function tools() {
  const body = el("div", {});
  show(el("h1", {}, "Tools"), body);
  try {
    const [inventory, stats, flows] = await Promise.all([api("/api/inventory"), api("/api/tools/stats"), api("/api/workflows")]);
    const by = new Map(stats.data.map((s) => [s.tool, s]));
    const users = new Map();
    const add = (tool, user) => { if (!users.has(tool)) users.set(tool, new Set()); users.get(tool).add(user); };
    for (const t of inventory.tools || []) for (const a of t.agents || []) add(t.name, a);
    const described = new Map((inventory.tools || []).map((t) => [t.name, t.description || ""]));
    const details = await Promise.all(flows.data.map((w) => api(`/api/workflows/${encodeURIComponent(w.name)}`)));
    for (const detail of details) {
      const walk = (node) => { if (node.tool) add(node.tool, `workflow ${detail.name}`); if (node.node) walk(node.node); };
      detail.spec.nodes.forEach(walk);
    }
    for (const s of stats.data) if (!users.has(s.tool)) users.set(s.tool, new Set());
    const rows = [...users.keys()].sort().map((name) => {
      const s = by.get(name);
      const cells = s && s.calls ? [s.calls, s.errors, s.repairs, s.blocks, `${s.latencyP50Ms} / ${s.latencyP99Ms} ms`]
        : [el("span", { class: "muted" }, "never called"), "", "", "", ""];
      return [el("span", { class: "mono" }, name), [...users.get(name)].join(", ") || el("span", { class: "muted" }, "none now"), el("span", { class: "input-line" }, firstLine(described.get(name), 80)), ...cells];
    });
    body.replaceChildren(table({ id: "tools" }, ["Tool", "Used by", "~Description", "Calls", "~Errors", "~Repairs", "~Blocks", "p50 / p99"], rows));
  } catch (e) { body.replaceChildren(failure(e)); }
}

// ---- memory -------------------------------------------------------------------------------

async function memory(params) {
  const q = params.get("q") || "";
  const namespace = params.get("namespace") || "";
  const form = el("form", { class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const query = new URLSearchParams();
    for (const [k, v] of new FormData(form).entries()) if (v) query.set(k, v);
    location.hash = "#/memory" + (query.toString() ? "?" + query : "");
  } },
    el("label", {}, "Search", el("input", { name: "q", value: q, type: "search", size: 24 })),
    el("label", {}, "Namespace", el("select", { name: "namespace", id: "namespace" }, el("option", { value: "" }, "any"))),
    el("button", { type: "submit" }, "Search"));
  const body = el("div", { id: "memory" });
  const inspector = el("div", { id: "memory-record" });
  show(el("h1", {}, "Memory"), form, body, inspector);
  try {
    const all = await api("/api/memory?limit=500");
    const spaces = [...new Set(all.data.map((r) => r.namespace))].sort();
    form.querySelector("#namespace").append(...spaces.map((n) => el("option", { value: n, selected: n === namespace }, n)));
    const ns = namespace ? `&namespace=${encodeURIComponent(namespace)}` : "";
    const records = q ? (await api(`/api/memory/search?q=${encodeURIComponent(q)}${ns}&limit=50`)).data.map((h) => ({ ...h.record, score: h.score }))
      : all.data.filter((r) => !namespace || r.namespace === namespace);
    body.replaceChildren(records.length ? table({ id: "memory-records" }, ["Record", "Namespace", "~Kind", "Text", q ? "~Score" : "~Updated"], records.map((r) => [
      el("a", { href: `#/memory/${encodeURIComponent(r.id)}`, class: "mono" }, r.id), r.namespace, r.kind, r.text,
      q ? Number(r.score).toFixed(3) : ago(r.updatedAt || r.createdAt)])) : el("p", { class: "muted" }, q ? "Nothing found." : "No records."));
  } catch (e) { body.replaceChildren(failure(e)); }
}

// One record: its versions, oldest first, each with what changed and where it came from.
async function memoryRecord(id) {
  show(el("h1", {}, "Memory record ", el("span", { class: "mono" }, id)));
  const main = document.getElementById("main");
  try {
    const history = await api(`/api/memory/${encodeURIComponent(id)}/history`);
    main.append(el("ol", { class: "versions", id: "versions" }, history.data.map((v, i) => el("li", { class: "card" },
      el("h2", {}, `Version ${v.version || i + 1}`, " ", el("span", { class: "muted" }, v.status || "")),
      el("p", {}, v.text),
      el("table", { class: "fields" }, el("tbody", {}, [
        ["namespace", v.namespace], ["kind", v.kind], ["created", when(v.createdAt)], ["updated", when(v.updatedAt)],
        ["provenance", v.provenance ? el("pre", {}, json(v.provenance)) : v.source ? el("pre", {}, json(v.source)) : "—"],
      ].filter(([, value]) => value).map(([k, value]) => el("tr", {}, el("th", {}, k), el("td", {}, value)))))))));
  } catch (e) { main.append(failure(e)); }
}

// ---- sessions and tasks -------------------------------------------------------------------

async function simpleList(title, path, columnsSpec, link) {
  const body = el("div", {});
  show(el("h1", {}, title), body);
  try {
    const page = await api(path);
    const items = Array.isArray(page) ? page : (page.data || []);
    body.replaceChildren(items.length ? table({}, columnsSpec.map(([label]) => label), items.map((item) => columnsSpec.map(([, value], i) => {
      const text = value(item);
      return i === 0 && link ? el("a", { href: link(item), class: "mono" }, text) : text;
    }))) : el("p", { class: "muted" }, "None."));
  } catch (e) { body.replaceChildren(failure(e)); }
}

async function session(id) {
  show(el("h1", {}, "Session ", el("span", { class: "mono" }, id)));
  const main = document.getElementById("main");
  try {
    const s = await api(`/api/sessions/${encodeURIComponent(id)}`);
    const messages = s.messages || s.transcript || [];
    main.append(el("ol", { class: "timeline" }, messages.map((m) => {
      const message = m.message || m;
      return el("li", {}, el("span", { class: "muted" }, m.seq || ""), el("span", {}, message.role), el("pre", {}, message.content || json(message.toolCalls || "")));
    })));
  } catch (e) { main.append(failure(e)); }
}

// ---- workspace ----------------------------------------------------------------------------

// The workspace as an inventory: agents with their model, tools, skills and policies; models;
// tools; MCP servers with their state. Only what the inventory lists (never a secret).
async function workspace() {
  show(el("h1", {}, "Workspace"));
  const main = document.getElementById("main");
  try {
    const inv = await api("/api/inventory");
    const list = (items) => items && items.length ? items.join(", ") : el("span", { class: "muted" }, "none");
    const stateOf = (s) => typeof s.state === "string" ? s.state : Object.keys(s.state || { unknown: 1 })[0];
    main.append(
      el("h2", {}, "Agents"),
      table({ id: "ws-agents" }, ["Agent", "Model", "Tools", "~Skills", "~Policies"], (inv.agents || []).map((a) => [
        el("span", {}, el("strong", {}, a.name), a.default ? el("span", { class: "muted" }, " (default)") : null), a.model, list(a.tools), list(a.skills), list(a.policies)])),
      el("h2", {}, "Models"),
      table({ id: "ws-models" }, ["Model", "Provider", "~Endpoint", "~Model id"], (inv.models || []).map((m) => [m.name, m.provider, m.baseUrl || m.endpoint || "", m.model || ""])),
      el("h2", {}, "Tools"),
      table({ id: "ws-tools" }, ["Tool", "Agents", "~Policy", "~Kind"], (inv.tools || []).map((t) => [el("span", { class: "mono" }, t.name), list(t.agents), t.policy || "", t.builtin ? "built in" : "workspace"])),
      el("h2", {}, "MCP servers"),
      (inv.mcpServers || []).length ? table({ id: "ws-mcp" }, ["Server", "State", "~Tools", "~Last error"], inv.mcpServers.map((s) => [s.name, statusCell(stateOf(s)), (s.tools || []).length, s.lastError || ""])) : el("p", { class: "muted" }, "No MCP servers."),
      el("h2", {}, "Skills"), el("p", {}, list((inv.skills || {}).names)),
      el("h2", {}, "API keys"),
      (inv.apiKeys || []).length ? table({ id: "ws-keys" }, ["Key", "Role", "Daily budget"], inv.apiKeys.map((k) => [k.name, k.role, k.budget || "—"])) : el("p", { class: "muted" }, "No API keys: the server answers loopback only."),
      el("h2", {}, "Policies and hooks"),
      el("p", {}, "Policies: ", list(inv.policies)), el("p", {}, "Hooks: ", list((inv.hooks || []).map((h) => `${h.name} (on ${h.event})`))),
      el("details", {}, el("summary", {}, "Everything, as JSON"), el("pre", { id: "inventory" }, json(inv))));
  } catch (e) { main.append(failure(e)); }
}
