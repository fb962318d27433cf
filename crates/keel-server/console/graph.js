// The console's workflows: each workflow's graph drawn as SVG with a layered layout computed
// here from its nodes and edges (no diagram library), every node coloured by its state in a
// run; the Workflows page with a "Run" form checked against the workflow's input schema and
// each workflow's recent runs.
"use strict";

const NODE_W = 168;
const NODE_H = 46;
const GAP_X = 28;
const GAP_Y = 54;

// Layers for `spec`'s nodes: the longest path from a start over forward edges (an edge
// closing a loop is a back edge and does not count), then an order within each layer that
// keeps edges short (two barycentre sweeps).
function layout(spec) {
  const ids = spec.nodes.map((n) => n.id);
  const index = new Map(ids.map((id, i) => [id, i]));
  const out = ids.map(() => []);
  for (const e of spec.edges) if (index.has(e.from) && index.has(e.to)) out[index.get(e.from)].push(index.get(e.to));
  // Back edges by depth-first search from the starts (then from any node not reached).
  const colour = new Uint8Array(ids.length);
  const back = new Set();
  const starts = (spec.start && spec.start.length ? spec.start : []).filter((s) => index.has(s)).map((s) => index.get(s));
  const visit = (root) => {
    const stack = [[root, 0]];
    colour[root] = 1;
    while (stack.length) {
      const top = stack[stack.length - 1];
      const [node, next] = top;
      if (next < out[node].length) {
        top[1] += 1;
        const to = out[node][next];
        if (colour[to] === 1) back.add(`${node}>${to}`);
        else if (colour[to] === 0) { colour[to] = 1; stack.push([to, 0]); }
      } else { colour[node] = 2; stack.pop(); }
    }
  };
  for (const s of starts) if (!colour[s]) visit(s);
  for (let i = 0; i < ids.length; i++) if (!colour[i]) visit(i);
  // Longest path layering over the forward edges (Kahn's order).
  const forward = out.map((targets, from) => targets.filter((to) => !back.has(`${from}>${to}`)));
  const indegree = new Int32Array(ids.length);
  forward.forEach((targets) => targets.forEach((to) => { indegree[to] += 1; }));
  const layer = new Int32Array(ids.length);
  const ready = [];
  for (let i = 0; i < ids.length; i++) if (!indegree[i]) ready.push(i);
  for (let head = 0; head < ready.length; head++) {
    const node = ready[head];
    for (const to of forward[node]) {
      layer[to] = Math.max(layer[to], layer[node] + 1);
      if (--indegree[to] === 0) ready.push(to);
    }
  }
  const layers = [];
  ids.forEach((_, i) => { (layers[layer[i]] = layers[layer[i]] || []).push(i); });
  const incoming = ids.map(() => []);
  forward.forEach((targets, from) => targets.forEach((to) => incoming[to].push(from)));
  const position = new Float64Array(ids.length);
  const place = () => layers.forEach((row) => row.forEach((n, i) => { position[n] = i; }));
  place();
  const sweep = (neighbours, rows) => {
    for (const row of rows) {
      const centre = (n) => neighbours[n].length ? neighbours[n].reduce((s, m) => s + position[m], 0) / neighbours[n].length : position[n];
      const keyed = row.map((n) => [centre(n), n]);
      keyed.sort((a, b) => a[0] - b[0]);
      keyed.forEach(([, n], i) => { row[i] = n; position[n] = i; });
    }
  };
  for (let pass = 0; pass < 2; pass++) {
    sweep(incoming, layers.slice(1));
    sweep(forward, layers.slice(0, -1).reverse());
  }
  const widest = Math.max(1, ...layers.map((row) => row.length));
  const width = widest * (NODE_W + GAP_X) + GAP_X;
  const points = ids.map(() => ({ x: 0, y: 0 }));
  layers.forEach((row, depth) => {
    const offset = (width - row.length * (NODE_W + GAP_X) + GAP_X) / 2;
    row.forEach((n, i) => { points[n] = { x: offset + i * (NODE_W + GAP_X), y: GAP_Y / 2 + depth * (NODE_H + GAP_Y) }; });
  });
  return { ids, index, points, back, out, width, height: layers.length * (NODE_H + GAP_Y) };
}

function nodeLabel(node) {
  const what = node.agent || node.tool || node.workflow || (node.kind === "map" && node.node ? `each: ${node.node.kind}` : "") || "";
  return what ? `${node.kind}: ${what}` : node.kind;
}

// Draws `spec` into `box`; answers a view whose nodes take states from a run's events.
function drawGraph(box, spec) {
  const { ids, index, points, back, out, width, height } = layout(spec);
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "graph", role: "img", "aria-label": "Workflow graph" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }))));
  const edges = svg("g", { class: "edges" });
  const edgeList = [];
  out.forEach((targets, from) => targets.forEach((to) => edgeList.push([from, to])));
  const edgePath = ([from, to]) => {
    const a = points[from];
    const b = points[to];
    const loop = back.has(`${from}>${to}`);
    let d;
    if (loop) {
      const x = Math.max(a.x, b.x) + NODE_W + GAP_X / 2;
      d = `M ${a.x + NODE_W} ${a.y + NODE_H / 2} C ${x} ${a.y + NODE_H / 2}, ${x} ${b.y + NODE_H / 2}, ${b.x + NODE_W} ${b.y + NODE_H / 2}`;
    } else {
      const x1 = a.x + NODE_W / 2, y1 = a.y + NODE_H, x2 = b.x + NODE_W / 2, y2 = b.y;
      const mid = (y1 + y2) / 2;
      d = `M ${x1} ${y1} C ${x1} ${mid}, ${x2} ${mid}, ${x2} ${y2}`;
    }
    return svg("path", { d, class: loop ? "edge loop" : "edge", "marker-end": "url(#arrow)" });
  };
  chart.append(edges);
  // A large graph is drawn across frames; a node not drawn yet keeps its state in its record
  // and is drawn with it.
  const nodes = new Map(spec.nodes.map((node, i) => [node.id, { spec: node, at: points[i], state: "pending", note: nodeLabel(node), items: new Map(), total: null, child: null, g: null, text: null }]));
  const drawNode = (n) => {
    const p = n.at;
    const map = n.spec.kind === "map";
    n.text = svg("text", { x: p.x + 8, y: p.y + 36, class: "node-note" }, n.note);
    n.g = svg("g", { class: `node state-${n.state}`, "data-node": n.spec.id, "data-state": n.state, tabindex: map ? 0 : null, role: map ? "button" : null },
      svg("title", {}, `${n.spec.id} (${nodeLabel(n.spec)})`),
      svg("rect", { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 6 }),
      svg("text", { x: p.x + 8, y: p.y + 18, class: "node-id" }, n.spec.id.length > 22 ? n.spec.id.slice(0, 21) + "…" : n.spec.id),
      n.text);
    if (n.child) n.g.dataset.child = n.child;
    if (n.done !== undefined) { n.g.dataset.done = String(n.done); n.g.dataset.failed = String(n.failed); }
    if (map) {
      const open = () => showItems(n);
      n.g.addEventListener("click", open);
      n.g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
    }
    return n.g;
  };
  appendInFrames(edges, edgeList, edgePath);
  appendInFrames(chart, [...nodes.values()], drawNode);
  const items = el("div", { class: "map-items" });
  box.replaceChildren(legend([["state-pending", "pending"], ["state-running", "running"], ["state-waiting", "waiting"], ["state-completed", "completed"], ["state-failed", "failed"], ["state-skipped", "skipped"]]),
    el("div", { class: "graph-scroll" }, chart), items);
  const setState = (n, value) => {
    n.state = value;
    if (!n.g) return;
    n.g.setAttribute("class", `node state-${value}`);
    n.g.dataset.state = value;
  };
  // Map nodes open to their items.
  const showItems = (n) => {
    items.replaceChildren(el("h3", {}, `${n.spec.id}: items`), el("ol", { start: 0 },
      [...n.items.entries()].sort((a, b) => a[0] - b[0]).map(([i, item]) => el("li", { "data-item": i }, statusCell(item.state),
        item.child ? [" ", el("a", { href: "#/requests/" + item.child, class: "mono" }, item.child)] : null))));
  };
  const mapNote = (n) => {
    const states = [...n.items.values()].map((i) => i.state);
    const done = states.filter((s) => s === "completed").length;
    const failed = states.filter((s) => s === "failed").length;
    const total = n.total === null ? states.length : n.total;
    n.note = `${done}/${total} done` + (failed ? `, ${failed} failed` : "");
    n.done = done;
    n.failed = failed;
    if (!n.g) return;
    n.text.textContent = n.note;
    n.g.dataset.done = String(done);
    n.g.dataset.failed = String(failed);
  };
  // Approvals waited on: the node whose child run asks, or the approval node itself.
  let waitingNodes = new Set();
  return {
    nodes,
    event(event) {
      const n = nodes.get(event.node);
      if (!n) return;
      const item = event.item;
      const states = { "runtime.workflow.node.started": "running", "runtime.workflow.node.completed": "completed", "runtime.workflow.node.failed": event.willRetry ? "running" : "failed", "runtime.workflow.node.skipped": "skipped" };
      const value = states[event.type];
      if (!value) return;
      if (item !== undefined && item !== null) {
        const entry = n.items.get(item) || { state: "pending", child: null };
        entry.state = value;
        if (event.childRequestId) entry.child = event.childRequestId;
        n.items.set(item, entry);
        mapNote(n);
        if (n.state === "pending") setState(n, "running");
        return;
      }
      if (event.type === "runtime.workflow.node.started") {
        if (n.spec.kind === "map" && Array.isArray(event.input)) { n.total = event.input.length; mapNote(n); }
        if (event.childRequestId) { n.child = event.childRequestId; if (n.g) n.g.dataset.child = n.child; }
      }
      setState(n, waitingNodes.has(n.spec.id) && value === "running" ? "waiting" : value);
    },
    waiting(approvals) {
      const now = new Set();
      for (const a of approvals) {
        for (const n of nodes.values()) {
          const viaChild = n.child && a.requestId === n.child;
          const viaItem = [...n.items.values()].some((i) => i.child && i.child === a.requestId);
          const own = typeof a.callId === "string" && a.callId.startsWith(`approval:${n.spec.id}#`);
          if (viaChild || viaItem || own) now.add(n.spec.id);
        }
      }
      for (const n of nodes.values()) {
        const state = n.state;
        if (now.has(n.spec.id) && (state === "running" || state === "pending")) setState(n, "waiting");
        else if (!now.has(n.spec.id) && state === "waiting") setState(n, "running");
      }
      waitingNodes = now;
    },
  };
}

// A run's page: the graph of its workflow above its timeline.
async function workflowGraph(box, name, runId) {
  try {
    const detail = await api(`/api/workflows/${encodeURIComponent(name)}`);
    const holder = el("div", {});
    box.replaceChildren(el("h2", {}, "Workflow ", el("a", { href: "#/workflows/" + encodeURIComponent(name) }, name)), holder);
    const view = drawGraph(holder, detail.spec);
    view.run = runId;
    return view;
  } catch (e) {
    box.replaceChildren(failure(e));
    return null;
  }
}

// ---- checking an input against a JSON schema (the common keywords) ------------------------

function schemaIssues(schema, value, path = "") {
  if (!schema || typeof schema !== "object") return [];
  const issues = [];
  const at = path || "/";
  const type = Array.isArray(value) ? "array" : value === null ? "null" : typeof value;
  const types = schema.type ? [].concat(schema.type) : null;
  const matches = (t) => t === type || (t === "integer" && Number.isInteger(value)) || (t === "number" && type === "number");
  if (types && !types.some(matches)) return [`${at}: expected ${types.join(" or ")}, got ${type}`];
  if (schema.enum && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) issues.push(`${at}: must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  if (type === "object") {
    for (const key of schema.required || []) if (!(key in value)) issues.push(`${path}/${key}: required`);
    for (const [key, sub] of Object.entries(schema.properties || {})) if (key in value) issues.push(...schemaIssues(sub, value[key], `${path}/${key}`));
    if (schema.additionalProperties === false) for (const key of Object.keys(value)) if (!(schema.properties || {})[key]) issues.push(`${path}/${key}: not allowed`);
  }
  if (type === "array" && schema.items) value.forEach((item, i) => issues.push(...schemaIssues(schema.items, item, `${path}/${i}`)));
  if (type === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) issues.push(`${at}: at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) issues.push(`${at}: at most ${schema.maxLength} characters`);
  }
  if (type === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) issues.push(`${at}: at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) issues.push(`${at}: at most ${schema.maximum}`);
  }
  return issues;
}

// An example input for a schema: each required property with a value of its type.
function example(schema) {
  if (!schema || typeof schema !== "object") return "";
  if (schema.default !== undefined) return schema.default;
  if (schema.enum) return schema.enum[0];
  const type = [].concat(schema.type || "object")[0];
  if (type === "object") {
    const out = {};
    for (const key of schema.required || Object.keys(schema.properties || {})) out[key] = example((schema.properties || {})[key] || {});
    return out;
  }
  return { string: "", integer: 0, number: 0, boolean: false, array: [], null: null }[type];
}

// ---- the Workflows page -------------------------------------------------------------------

async function workflows(name) {
  const main = el("div", {});
  show(el("h1", {}, name ? ["Workflow ", el("span", { class: "mono" }, name)] : "Workflows"), main);
  try {
    const page = await api("/api/workflows");
    const list = name ? page.data.filter((w) => w.name === name) : page.data;
    if (!list.length) { main.append(el("p", { class: "muted" }, name ? `No workflow ${name}.` : "No workflows.")); return; }
    const details = await Promise.all(list.map((w) => api(`/api/workflows/${encodeURIComponent(w.name)}`)));
    for (const [i, w] of list.entries()) {
      const detail = details[i];
      const section = el("section", { class: "workflow", "data-workflow": w.name });
      const holder = el("div", {});
      const recent = el("div", { class: "recent" });
      fill(section, {}, [el("h2", {}, el("a", { href: "#/workflows/" + encodeURIComponent(w.name) }, w.name)), w.description ? el("p", {}, w.description) : null,
        el("p", { class: "muted" }, `${w.nodes} nodes` + (w.phases.length ? `, phases: ${w.phases.join(" → ")}` : "")),
        holder, runForm(w.name, detail.spec), el("h3", {}, "Recent runs"), recent]);
      main.append(section);
      drawGraph(holder, detail.spec);
      loadRecent(recent, w.name);
    }
  } catch (e) { main.append(failure(e)); }
}

async function loadRecent(box, name) {
  try {
    const page = await api(`/api/requests?agent=${encodeURIComponent("workflow/" + name)}&limit=5`);
    box.replaceChildren(page.data.length ? table({ class: "recent-runs" }, ["Request", "Status", "~Started", "~Duration"], page.data.map((r) => [
      el("a", { href: "#/requests/" + r.requestId, class: "mono" }, r.requestId), statusCell(r.status), ago(r.startedAt),
      r.endedAt ? duration(new Date(r.endedAt) - new Date(r.startedAt)) : "running"])) : el("p", { class: "muted" }, "No runs yet."));
  } catch (e) { box.replaceChildren(failure(e)); }
}

function runForm(name, spec) {
  const schema = spec.input && spec.input.schema;
  const editor = el("textarea", { name: "input", rows: 5, spellcheck: "false", class: "mono", "aria-label": `Input of ${name}` });
  editor.value = schema ? JSON.stringify(example(schema), null, 2) : "";
  const issues = el("ul", { class: "issues", "aria-live": "polite" });
  const submit = el("button", { class: "primary", type: "submit" }, "Run");
  const check = () => {
    if (!schema) { issues.replaceChildren(); submit.disabled = false; return null; }
    let value;
    try { value = JSON.parse(editor.value); } catch (e) {
      issues.replaceChildren(el("li", {}, `not JSON: ${e.message}`));
      submit.disabled = true;
      return null;
    }
    const found = schemaIssues(schema, value);
    issues.replaceChildren(...found.map((i) => el("li", {}, i)));
    submit.disabled = found.length > 0;
    return found.length ? null : value;
  };
  editor.addEventListener("input", check);
  check();
  return el("form", { class: "run-form", onsubmit: async (event) => {
    event.preventDefault();
    if (schema && check() === null) return;
    try {
      const started = await api("/api/requests", { method: "POST", body: { workflow: name, input: editor.value } });
      location.hash = "#/requests/" + started.requestId;
    } catch (e) { issues.replaceChildren(el("li", {}, e.message)); }
  } }, el("label", {}, schema ? "Input (JSON, checked against the workflow's input schema)" : "Input", editor), issues, el("div", { class: "actions" }, submit));
}
