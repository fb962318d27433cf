// The console's run page: the run's record and actions, what it waits for (decided right
// there), a workflow run's graph, the waterfall of its spans, and its events as a timeline
// that follows the live stream.
"use strict";

// ---- events in words ----------------------------------------------------------------------

// A readable name for an event: "tool call read_file", not `runtime.adapter.event`.
function eventName(event) {
  const e = event.event || {};
  switch (event.type) {
    case "runtime.request.started": return "request started";
    case "runtime.request.completed": return "request completed";
    case "runtime.request.failed": return "request failed";
    case "runtime.request.cancelled": return "request cancelled";
    case "runtime.request.interrupted": return "request interrupted";
    case "runtime.request.resumed": return "request resumed";
    case "runtime.request.forked": return "forked";
    case "runtime.model.started": return `model call ${event.model}`;
    case "runtime.model.completed": return "model answered";
    case "runtime.model.retry": return "model retry";
    case "runtime.model.fallback": return `fallback to ${event.to}`;
    case "runtime.model.queued": return "waited for the model";
    case "runtime.tool.guard": return `gateway ${event.decision} ${event.tool}`;
    case "runtime.policy.decided": return `policy ${event.decision} ${event.tool}`;
    case "runtime.hook.completed": return `hook ${event.hook}`;
    case "runtime.hook.failed": return `hook ${event.hook} failed`;
    case "runtime.approval.requested": return `approval asked: ${event.approval.tool}`;
    case "runtime.approval.resolved": return `approval ${event.status}`;
    case "runtime.context.compacted": return "context compacted";
    case "runtime.tool.direct.started": return `direct call ${event.tool}`;
    case "runtime.tool.direct.completed": return "direct call done";
    case "runtime.tool.sandbox": return "sandbox";
    case "runtime.artifact.created": return "artifact";
    case "runtime.workflow.started": return `workflow ${event.workflow}`;
    case "runtime.workflow.completed": return "workflow completed";
    case "runtime.workflow.failed": return "workflow failed";
    case "runtime.workflow.node.started": return `node ${event.node} started`;
    case "runtime.workflow.node.completed": return `node ${event.node} completed`;
    case "runtime.workflow.node.failed": return `node ${event.node} failed`;
    case "runtime.workflow.node.skipped": return `node ${event.node} skipped`;
    case "runtime.adapter.event":
      if (e.phase === "agent.tool.start") return `tool call ${e.toolId}`;
      if (e.phase === "agent.tool.result") return `tool result ${e.toolId}`;
      if (e.phase === "agent.output.delta") return "output";
      if (e.phase === "agent.handoff") return `subagent ${e.agent}`;
      if (e.phase === "agent.progress") return `progress ${e.kind}`;
      if (e.phase === "agent.log") return `log ${e.stream}`;
      return e.phase || "adapter event";
    default: return event.type.replace(/^runtime\./, "").replace(/\./g, " ");
  }
}

function summary(event) {
  const e = event.event || {};
  switch (event.type) {
    case "runtime.request.started": return event.input;
    case "runtime.model.started": return `step ${event.step}, attempt ${event.attempt}`;
    case "runtime.model.completed": return `step ${event.step}: ${tokensText(event.usage)}${event.usage.cost ? ", " + costText(event.usage) : ""}, ${event.latencyMs} ms, ${event.stopReason}` + (event.content ? ` — ${event.content}` : "");
    case "runtime.policy.decided": return `by ${event.source}` + (event.reason ? ` (${event.reason})` : "");
    case "runtime.hook.completed": return `on ${event.event}: ${event.outcome}`;
    case "runtime.hook.failed": return `on ${event.event}: ${event.error}`;
    case "runtime.approval.requested": return `waits for a person (asked by ${event.approval.askedBy})`;
    case "runtime.approval.resolved": return (event.decidedBy ? `by ${event.decidedBy}` : "") + (event.reason ? `: ${event.reason}` : "");
    case "runtime.adapter.event":
      if (e.phase === "agent.tool.start") return JSON.stringify(e.args);
      if (e.phase === "agent.tool.result") return `${e.ok ? "ok" : "failed"} in ${e.durationMs} ms: ${e.output}`;
      if (e.phase === "agent.output.delta") return e.text;
      if (e.phase === "agent.handoff") return e.childRequestId;
      if (e.phase === "agent.progress") return JSON.stringify(e.data);
      if (e.phase === "agent.log") return e.line;
      return "";
    case "runtime.request.completed": return `${event.finishReason}, ${event.steps} steps, ${event.usage.totalTokens} tokens, ${event.durationMs} ms`;
    case "runtime.request.failed": return `${event.error.code}: ${event.error.message}`;
    case "runtime.workflow.node.started": return `${event.kind}` + (event.item !== undefined ? `, item ${event.item}` : "") + (event.attempt > 1 ? `, attempt ${event.attempt}` : "");
    case "runtime.workflow.node.completed": return JSON.stringify(event.output);
    case "runtime.workflow.node.failed": return event.error;
    case "runtime.workflow.node.skipped": return event.reason;
    case "runtime.context.compacted": return event.reason || "";
    default: return "";
  }
}

const REMOVED = new Set(["drop_unknown", "drop_null"]);

// The details a timeline row shows under its summary: a repaired call's arguments as a diff
// (a removed property as removed), a blocked call's issues, an artifact's link.
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
      ...event.repairs.map((r) => REMOVED.has(r.kind)
        ? el("div", { class: "mono", "data-kind": r.kind }, `${r.path || "/"}: `, el("del", {}, JSON.stringify(r.from)), el("span", { class: "removed" }, " removed"), ` (${r.kind === "drop_null" ? "null the schema does not allow" : "not in the schema"})`)
        : el("div", { class: "mono", "data-kind": r.kind }, `${r.path || "/"} (${r.kind}): `, el("del", {}, JSON.stringify(r.from)), " → ", el("ins", {}, JSON.stringify(r.to))))));
  }
  if (event.issues && event.issues.length) {
    parts.push(el("ul", { class: "issues" }, event.issues.map((i) => el("li", {}, `${i.path || "/"}: ${i.message}`))));
  }
  return parts.length ? el("div", {}, parts) : null;
}

const ENDED = ["completed", "failed", "cancelled", "interrupted"];

// ---- the page -----------------------------------------------------------------------------

async function request(id) {
  const head = el("div", { id: "run-head" });
  const waiting = el("div", { id: "waiting" });
  const actions = el("div", { class: "actions" });
  const tree = el("div", {});
  const graph = el("div", { id: "run-graph" });
  const waterfall = el("div", { id: "waterfall", class: "waterfall" });
  const timeline = el("ol", { class: "timeline", id: "timeline", "aria-live": "polite" });
  show(el("h1", {}, "Request ", el("span", { class: "mono" }, id)), head, waiting, actions, graph, tree,
    el("h2", {}, "Waterfall"), waterfall, el("h2", {}, "Events"), timeline);
  const message = el("span", { role: "status" });
  const go = (started, stay) => started
    .then((r) => { if (stay) { refresh(); } else { location.hash = "#/requests/" + r.requestId; } })
    .catch((e) => { message.replaceChildren(failure(e)); });
  let actionsFor = null;
  let run = null;
  const refresh = async () => {
    try {
      run = await api(`/api/requests/${encodeURIComponent(id)}?tree=true`);
      const took = run.endedAt ? new Date(run.endedAt) - new Date(run.startedAt) : null;
      const fields = [
        ["status", statusCell(run.status)], ["agent", run.agent], ["started", when(run.startedAt)],
        ["ended", when(run.endedAt)], took !== null ? ["duration", duration(took)] : null,
        ["tokens", run.usage ? tokensText(run.usage) : "0"],
        run.usage && run.usage.cost ? ["cost", costText(run.usage)] : null,
        ["input", el("pre", {}, run.input)],
        run.output !== undefined ? ["output", el("pre", { id: "output" }, run.output)] : null,
        run.error ? ["error", el("pre", { class: "error" }, `${run.error.code}: ${run.error.message}`)] : null,
        run.links && run.links.parentId ? ["parent", el("a", { href: "#/requests/" + run.links.parentId, class: "mono" }, run.links.parentId)] : null,
      ].filter(Boolean);
      head.replaceChildren(el("table", { class: "fields" }, el("tbody", {}, fields.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))))));
      const ended = ENDED.includes(run.status);
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

  // What waits for a person in this run or the runs it started, decided right here.
  const pending = async () => {
    // An ended run waits for nothing: the poll stops asking once its cards are gone.
    if (run && ENDED.includes(run.status) && !waiting.children.length) return;
    try {
      const page = await api("/api/approvals?status=pending");
      const mine = page.data.filter((a) => a.status === "pending" && (a.requestId === id || a.rootRequestId === id));
      const ids = new Set(mine.map((a) => a.approvalId));
      for (const card of [...waiting.children]) if (!ids.has(card.dataset.id)) card.remove();
      for (const a of mine) {
        if (waiting.querySelector(`[data-id="${CSS.escape(a.approvalId)}"]`)) continue;
        const card = el("section", { class: "card waiting", "data-id": a.approvalId },
          el("h2", {}, "Waiting for a decision: ", el("span", { class: "mono" }, a.tool)),
          a.askReason ? el("p", {}, a.askReason) : null,
          el("pre", {}, json(a.arguments)),
          a.requestId !== id ? el("p", { class: "muted" }, "In ", el("a", { href: "#/requests/" + a.requestId, class: "mono" }, a.requestId)) : null,
          decisionButtons(a, () => { card.remove(); refresh(); }));
        waiting.append(card);
      }
      if (graphView) graphView.waiting(mine);
    } catch (e) { waiting.replaceChildren(failure(e)); }
  };
  if (!ENDED.includes(run && run.status)) every(1500, pending);

  // The waterfall, redrawn from the trace as the run goes (at most once a second).
  let drawn = 0;
  let drawnKey = null;
  let drawing = null;
  const drawWaterfall = () => {
    if (drawing) return;
    drawing = setTimeout(async () => {
      drawing = null;
      try {
        const trace = await api(`/api/requests/${encodeURIComponent(id)}/trace`);
        // An ended trace changes only by spans added or ending: unchanged, it is not redrawn.
        const key = traceKey(trace);
        if (key !== drawnKey) renderWaterfall(waterfall, trace, id, eventsBySeq);
        drawnKey = key;
        drawn += 1;
        waterfall.dataset.drawn = String(drawn);
      } catch (e) { waterfall.replaceChildren(failure(e)); }
    }, drawn ? 1000 : 0);
  };

  // The timeline: rows added in batches, once per frame, so a long log never blocks the page;
  // consecutive output chunks share one row; narration is the row's plain-words line.
  let graphView = null;
  const eventsBySeq = new Map();
  const rowsBySeq = new Map();
  let queue = [];
  let next = 0;
  let previous = null;
  let outputRow = null;
  // One queued event into the timeline; true while more are queued.
  const addEvent = () => {
    const event = queue[next];
    queue[next++] = undefined;
    if (next === queue.length) { queue = []; next = 0; }
    if (event.type === "runtime.progress.narration") {
      const row = rowsBySeq.get(event.seq);
      if (row && !row.querySelector(".say")) row.querySelector(".what").after(el("div", { class: "say" }, event.message));
      return queue.length > 0;
    }
    eventsBySeq.set(event.seq, event);
    const delta = previous ? new Date(event.ts) - new Date(previous.ts) : 0;
    previous = event;
    const e = event.event || {};
    if (e.phase === "agent.output.delta" && outputRow) {
      outputRow.chunks.appendData(e.text);
      outputRow.count += 1;
      outputRow.last = event.seq;
      outputRow.row.dataset.last = String(event.seq);
      outputRow.what.textContent = `output (${outputRow.count} chunks, events ${outputRow.first}–${outputRow.last})`;
      rowsBySeq.set(event.seq, outputRow.row);
      return queue.length > 0;
    }
    const text = el("div", { class: "summary" }, summary(event));
    const what = el("div", { class: "what" }, eventName(event));
    const row = el("li", { "data-type": event.type, "data-seq": event.seq, class: "kind-" + kindOf(event) },
      el("span", { class: "muted mono seq" }, event.seq),
      el("span", { class: "when mono" }, clock(event.ts), el("br"), el("span", { class: "muted delta" }, delta ? `+${duration(delta)}` : "")),
      el("div", { class: "body" }, what, text, details(event)));
    outputRow = e.phase === "agent.output.delta" ? { row, what, chunks: text.firstChild || text.appendChild(document.createTextNode("")), count: 1, first: event.seq, last: event.seq } : null;
    rowsBySeq.set(event.seq, row);
    timeline.append(row);
    if (rowsBySeq.size > 300) timeline.classList.add("long");
    if (graphView) graphView.event(event);
    return queue.length > 0;
  };
  const stream = new AbortController();
  state.source = stream;
  follow(id, stream.signal, async (event) => {
    // A workflow run's graph is drawn before its first node's event is shown.
    if (event.type === "runtime.workflow.started" && !graphView) graphView = await workflowGraph(graph, event.workflow, id);
    queue.push(event);
    if (queue.length - next === 1) inFrames(addEvent);
    if (/runtime\.approval\./.test(event.type)) { refresh(); pending(); }
    if (event.type !== "runtime.progress.narration" && !(event.event && event.event.phase === "agent.output.delta")) drawWaterfall();
    if (/runtime\.request\.(completed|failed|cancelled|interrupted)/.test(event.type)) settle();
  });
  drawWaterfall();
  // The run's record is updated just after its terminal event is stored: read it until it
  // says the run ended (output, status, usage), briefly.
  async function settle() {
    for (let tries = 0; tries < 50; tries++) {
      if (await refresh()) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    drawWaterfall();
    pending();
  }
}

// The colour family of an event or span.
function kindOf(event) {
  const t = event.type;
  if (t.startsWith("runtime.model.")) return "model";
  if (t === "runtime.tool.guard" || t === "runtime.policy.decided" || t.startsWith("runtime.tool.")) return "tool";
  if (t.startsWith("runtime.hook.")) return "hook";
  if (t.startsWith("runtime.approval.")) return "approval";
  if (t.startsWith("runtime.context.")) return "compaction";
  if (t.startsWith("runtime.workflow.")) return "workflow";
  if (t === "runtime.adapter.event") {
    const phase = (event.event || {}).phase || "";
    if (phase.startsWith("agent.tool.")) return "tool";
    if (phase === "agent.handoff") return "child";
  }
  if (/failed$/.test(t)) return "error";
  return "run";
}

function spanKind(span) {
  const name = span.name;
  if (name.startsWith("chat ")) return "model";
  if (name.startsWith("execute_tool ")) return "tool";
  if (name.startsWith("keel.hook")) return "hook";
  if (name === "keel.approval") return "approval";
  if (name === "keel.context.compaction") return "compaction";
  if (name.startsWith("keel.workflow.node")) return "workflow";
  if (name === "keel.memory.recall") return "memory";
  return "run";
}

// ---- the waterfall ------------------------------------------------------------------------

// Draws `trace`'s spans as bars on one time axis, parents before children, each with its
// duration, tokens and cost; a bar opens to the events behind it.
function traceKey(trace) {
  let ended = 0;
  let last = 0;
  for (const s of trace.spans) if (s.endUnixNanos) { ended += 1; last = Math.max(last, s.endUnixNanos); }
  // A span still running grows with the clock: such a trace is always drawn.
  return ended < trace.spans.length ? `live:${performance.now()}` : `${trace.spans.length}:${last}`;
}

function renderWaterfall(box, trace, id, eventsBySeq) {
  const spans = trace.spans;
  if (!spans.length) { box.replaceChildren(el("p", { class: "muted" }, "No spans yet.")); return; }
  const now = Date.now() * 1e6;
  const start = Math.min(...spans.map((s) => s.startUnixNanos));
  const end = Math.max(...spans.map((s) => s.endUnixNanos || now));
  const total = Math.max(end - start, 1e6);
  // Depth first, children in start order.
  const children = new Map();
  const ids = new Set(spans.map((s) => s.spanId));
  for (const s of spans) {
    const parent = s.parentSpanId && ids.has(s.parentSpanId) ? s.parentSpanId : "";
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(s);
  }
  for (const list of children.values()) list.sort((a, b) => a.startUnixNanos - b.startUnixNanos);
  const ordered = [];
  const walk = (parent, depth) => (children.get(parent) || []).forEach((s) => { ordered.push([s, depth]); walk(s.spanId, depth + 1); });
  walk("", 0);
  const open = new Set([...box.querySelectorAll(".bar-row.open")].map((r) => r.dataset.span));
  const makeRow = ([span, depth]) => {
    const a = span.attributes || {};
    const kind = spanKind(span);
    const left = ((span.startUnixNanos - start) / total) * 100;
    const width = Math.max((((span.endUnixNanos || now) - span.startUnixNanos) / total) * 100, 0.3);
    const facts = [span.durationMs === undefined || span.durationMs === null ? "running" : duration(span.durationMs)];
    if (a["gen_ai.usage.input_tokens"] !== undefined) facts.push(`${a["gen_ai.usage.input_tokens"]} in / ${a["gen_ai.usage.output_tokens"] || 0} out tokens`);
    if (a["keel.cost.amount"] !== undefined) facts.push(`${a["keel.cost.amount"]} ${a["keel.cost.currency"] || ""}`.trim());
    if (a["keel.gateway.decision"]) facts.push(`gateway ${a["keel.gateway.decision"]}` + (a["keel.gateway.repairs"] ? ` (${a["keel.gateway.repairs"]} repair${a["keel.gateway.repairs"] === 1 ? "" : "s"})` : ""));
    if (a["keel.policy.decision"]) facts.push(`policy ${a["keel.policy.decision"]}` + (a["keel.policy.rule"] ? ` by ${a["keel.policy.rule"]}` : ""));
    if (a["keel.hook.outcome"]) facts.push(a["keel.hook.outcome"]);
    if (a["keel.approval.status"]) facts.push(a["keel.approval.status"] + (a["keel.approval.decided_by"] ? ` by ${a["keel.approval.decided_by"]}` : ""));
    if (a["keel.workflow.node.state"]) facts.push(a["keel.workflow.node.state"]);
    if (span.status && span.status.code === "error") facts.push("error" + (span.status.message ? `: ${span.status.message}` : ""));
    const bar = el("div", { class: "track" });
    const fillBar = el("div", { class: `bar k-${kind}` + (span.endUnixNanos ? "" : " live") + (span.status && span.status.code === "error" ? " failed" : "") });
    fillBar.style.left = left + "%";
    fillBar.style.width = Math.min(width, 100 - left) + "%";
    bar.append(fillBar);
    const label = el("button", { type: "button", class: "bar-label", "aria-expanded": "false" }, span.name);
    label.style.paddingLeft = (depth * 0.9 + 0.3) + "rem";
    const row = el("div", { class: "bar-row", "data-span": span.spanId, "data-name": span.name, "data-kind": kind,
      "data-start": span.startUnixNanos, "data-end": span.endUnixNanos || "", "data-request": span.requestId },
      label, bar, el("span", { class: "bar-facts" }, facts.join(" · ")));
    const toggle = () => {
      const opened = row.classList.toggle("open");
      label.setAttribute("aria-expanded", String(opened));
      const shown = row.nextSibling && row.nextSibling.classList && row.nextSibling.classList.contains("bar-events") ? row.nextSibling : null;
      if (!opened) { if (shown) shown.remove(); return; }
      row.after(barEvents(span, id, eventsBySeq));
    };
    label.addEventListener("click", toggle);
    if (open.has(span.spanId)) queueMicrotask(toggle);
    return row;
  };
  const axis = el("div", { class: "bar-row axis-row" }, el("span", {}, ""), el("div", { class: "track axis-track" },
    el("span", { class: "tick-start" }, "0"), el("span", { class: "tick-end" }, duration(total / 1e6))), el("span", {}, ""));
  box.replaceChildren(legend([["k-run", "run"], ["k-model", "model round"], ["k-tool", "tool call"], ["k-hook", "hook"], ["k-approval", "approval wait"], ["k-compaction", "compaction"], ["k-workflow", "workflow node"]]), axis);
  box.classList.toggle("long", ordered.length > 200);
  appendInFrames(box, ordered, makeRow);
}

// The events behind a span: this run's from the page, a child run's read from the API.
function barEvents(span, id, eventsBySeq) {
  const list = el("ol", { class: "bar-events" });
  const line = (event) => el("li", {}, el("span", { class: "mono muted" }, `#${event.seq} ${clock(event.ts)} `), el("strong", {}, eventName(event)), " ", summary(event).slice(0, 300));
  if (span.requestId === id) {
    for (const seq of span.seqs) { const event = eventsBySeq.get(seq); if (event) list.append(line(event)); }
  } else {
    list.append(el("li", {}, "In ", el("a", { href: "#/requests/" + span.requestId, class: "mono" }, span.requestId)));
    const from = Math.min(...span.seqs) - 1;
    const count = Math.max(...span.seqs) - from;
    api(`/api/requests/${encodeURIComponent(span.requestId)}/events?after=${from}&limit=${Math.min(Math.max(count, 1), 10000)}`).then((page) => {
      const wanted = new Set(span.seqs);
      for (const event of (page.data || page)) if (wanted.has(event.seq)) list.append(line(event));
    }).catch((e) => list.append(el("li", {}, failure(e))));
  }
  if (!list.children.length) list.append(el("li", { class: "muted" }, "No events."));
  return list;
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
          if (event.type === "runtime.progress.narration") { if (event.seq <= last) await onEvent(event); continue; }
          if (event.seq <= last) continue;
          last = event.seq;
          await onEvent(event);
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
