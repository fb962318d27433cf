//! A run's spans, computed from its events (`docs/observability.md`).
//!
//! One mapping serves both uses: [`TraceBuilder`] is fed a run's events in `seq` order and
//! hands back each span as it ends — live, for OTLP export, as the events are stored — and
//! [`spans_of`] runs it over a stored log for `GET /api/requests/{id}/trace` and
//! `keel runs show --trace`, which therefore need no collector and agree with what was
//! exported. Span ids are derived ([`keel_types::trace::span_id`]), never stored, so the code
//! that sends a `traceparent` (a model request, a tool's process, a child run) names the same
//! span this module later builds.
//!
//! Names and attributes follow the OpenTelemetry GenAI semantic conventions
//! ([`SEMCONV_VERSION`]); what they do not cover is in the `keel.*` namespace.

mod attrs;

use std::collections::HashMap;

use keel_types::trace::{attempt_key, call_key, seq_key, span_id};
use keel_types::{
    AdapterEvent, Event, EventPayload, RequestId, RunRecord, RunTrace, SpanId, TraceId,
};
use serde::Serialize;
use serde_json::{Map, Value};

/// The version of the OpenTelemetry semantic conventions the spans follow (the GenAI
/// conventions' latest experimental names, as `OTEL_SEMCONV_STABILITY_OPT_IN=
/// gen_ai_latest_experimental` selects in other instrumentations).
pub const SEMCONV_VERSION: &str = "1.41.0";

/// What a span describes, as OpenTelemetry's span kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    Internal,
    Client,
}

/// How a span ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanStatus {
    /// `unset` (nothing to say), `ok` or `error`.
    pub code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl SpanStatus {
    const UNSET: Self = Self {
        code: "unset",
        message: None,
    };

    fn error(message: impl Into<String>) -> Self {
        Self {
            code: "error",
            message: Some(message.into()),
        }
    }
}

/// A link from one span to another (a resumed attempt to its run's first attempt).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanLink {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub attributes: Map<String, Value>,
}

/// One span of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<SpanId>,
    /// The parent is a caller's span (an incoming `traceparent`), not Keel's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub remote_parent: bool,
    pub name: String,
    pub kind: SpanKind,
    /// Start and end, as Unix time in nanoseconds (event times have millisecond precision).
    pub start_unix_nanos: u64,
    /// `None` while the span is open (the run has not reached its end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_unix_nanos: Option<u64>,
    pub status: SpanStatus,
    pub attributes: Map<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<SpanLink>,
    /// The run whose events the span is made of.
    pub request_id: RequestId,
    /// The `seq` of those events.
    pub seqs: Vec<u64>,
    /// Whether the trace is sampled (exported).
    #[serde(skip)]
    pub sampled: bool,
}

impl Span {
    /// How long the span lasted, in milliseconds (so far, for an open span: `None`).
    pub fn duration_ms(&self) -> Option<u64> {
        self.end_unix_nanos
            .map(|end| end.saturating_sub(self.start_unix_nanos) / 1_000_000)
    }
}

/// What a run tells those it calls: the `traceparent` naming one of its spans (W3C trace
/// context), for model requests, tools, hooks and MCP servers.
#[derive(Debug, Clone)]
pub struct Propagation {
    run: RequestId,
    trace: RunTrace,
    attempt: SpanId,
}

impl Propagation {
    /// For `record`'s first attempt.
    pub fn new(record: &RunRecord) -> Self {
        Self {
            run: record.request_id.clone(),
            trace: trace_of(record),
            attempt: span_id(&record.request_id, &attempt_key(1)),
        }
    }

    /// The run's attempt that began with event `seq` (a resumed or forked run's).
    pub fn begin_attempt(&mut self, seq: u64) {
        self.attempt = span_id(&self.run, &attempt_key(seq.max(1)));
    }

    pub fn trace(&self) -> &RunTrace {
        &self.trace
    }

    /// The current attempt's span (the run's root span).
    pub fn attempt_span(&self) -> SpanId {
        self.attempt
    }

    /// The `traceparent` naming the current attempt's span.
    pub fn attempt(&self) -> String {
        self.trace.parent_of(self.attempt).to_string()
    }

    /// The `traceparent` naming the span `key` ([`keel_types::trace`]'s keys) of this run.
    pub fn of(&self, key: &str) -> String {
        self.trace.parent_of(span_id(&self.run, key)).to_string()
    }

    /// The `traceparent` naming a tool call's span.
    pub fn of_call(&self, call_id: &str) -> String {
        self.of(&call_key(call_id))
    }
}

/// A child run's trace: its parent's, under the parent's call or node `call`
/// ([`keel_types::RunLinks::parent_call`]).
pub fn child_trace(parent: &RunRecord, call: &str) -> RunTrace {
    trace_of(parent).child(span_id(&parent.request_id, &call_key(call)))
}

/// The share of new traces kept: `observability.otlp.sampling` when the workspace configures
/// export, else OpenTelemetry's `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG`, else all.
pub fn sampling_ratio(spec: &keel_workspace::ObservabilitySpec) -> f64 {
    if let Some(otlp) = &spec.otlp {
        return otlp.sampling;
    }
    let sampler = std::env::var("OTEL_TRACES_SAMPLER").unwrap_or_default();
    match sampler.as_str() {
        "always_off" | "parentbased_always_off" => 0.0,
        "traceidratio" | "parentbased_traceidratio" => std::env::var("OTEL_TRACES_SAMPLER_ARG")
            .ok()
            .and_then(|arg| arg.trim().parse::<f64>().ok())
            .filter(|ratio| (0.0..=1.0).contains(ratio))
            .unwrap_or(1.0),
        _ => 1.0,
    }
}

/// The trace a run's spans belong to: the one on its record, or (a run recorded before traces
/// were kept) one derived from its id, so the same run always gets the same trace.
pub fn trace_of(record: &RunRecord) -> RunTrace {
    record.trace.clone().unwrap_or_else(|| RunTrace {
        trace_id: derived_trace_id(&record.request_id),
        parent_span_id: None,
        remote_parent: false,
        sampled: true,
        tracestate: None,
    })
}

fn derived_trace_id(run: &RequestId) -> TraceId {
    let a = span_id(run, "trace:high");
    let b = span_id(run, "trace:low");
    let mut id = [0; 16];
    id[..8].copy_from_slice(&a.0);
    id[8..].copy_from_slice(&b.0);
    TraceId(id)
}

/// The spans of a stored run (`events` in `seq` order); spans still open at the end of the log
/// are returned open (`end_unix_nanos: None`).
pub fn spans_of(record: &RunRecord, events: &[Event], capture_content: bool) -> Vec<Span> {
    let mut builder = TraceBuilder::new(record, 0, capture_content);
    for event in events {
        builder.push(event);
    }
    let mut spans = builder.take_finished();
    spans.extend(builder.into_open());
    spans.sort_by_key(|span| (span.start_unix_nanos, span.seqs.first().copied()));
    spans
}

/// Builds a run's spans from its events, one event at a time.
#[derive(Debug)]
pub struct TraceBuilder {
    run: RequestId,
    agent: String,
    session: Option<String>,
    trace: RunTrace,
    capture_content: bool,
    /// The current attempt's span (the run's root span), once its first event was seen.
    root: Option<Span>,
    /// The first attempt's span id, for a resumed attempt's link.
    first_root: SpanId,
    /// Open spans by key (`call:<id>`, `chat`, `approval:<id>`, `node:<…>`).
    open: HashMap<String, Span>,
    /// Keys already used by a finished span (a call run again after a resume gets another).
    used: std::collections::HashSet<String>,
    finished: Vec<Span>,
    /// The time of the previous event (a compaction or recall began right after it).
    last_nanos: u64,
    /// The `seq` the log continues after (a resumed run's builder starts there).
    continues_after: u64,
}

impl TraceBuilder {
    /// A builder for `record`'s events after `last_seq` (0: from its beginning).
    pub fn new(record: &RunRecord, last_seq: u64, capture_content: bool) -> Self {
        Self {
            run: record.request_id.clone(),
            agent: record.agent.clone(),
            session: record.session_id.as_ref().map(ToString::to_string),
            trace: trace_of(record),
            capture_content,
            root: None,
            first_root: span_id(&record.request_id, &attempt_key(1)),
            open: HashMap::new(),
            used: std::collections::HashSet::new(),
            finished: Vec::new(),
            last_nanos: 0,
            continues_after: last_seq,
        }
    }

    /// The run's trace.
    pub fn trace(&self) -> &RunTrace {
        &self.trace
    }

    /// The spans that ended since the last call.
    pub fn take_finished(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.finished)
    }

    /// The spans still open, root last.
    pub fn into_open(mut self) -> Vec<Span> {
        let mut open: Vec<Span> = self.open.drain().map(|(_, span)| span).collect();
        open.sort_by_key(|span| span.start_unix_nanos);
        open.extend(self.root.take());
        open
    }

    /// Takes in the run's next event.
    pub fn push(&mut self, event: &Event) {
        let at = unix_nanos(&event.ts).unwrap_or(self.last_nanos);
        let opens_attempt = matches!(
            event.payload,
            EventPayload::RequestResumed { .. } | EventPayload::RequestForked { .. }
        );
        if self.root.is_none() && !opens_attempt {
            // The first event of a log (or of what this process sees of it) opens the attempt.
            let seq = match self.continues_after {
                0 => 1,
                _ => event.seq,
            };
            self.open_root(seq, at, None);
        }
        self.map(event, at);
        if let Some(root) = &mut self.root {
            root.seqs.push(event.seq);
        }
        self.last_nanos = at;
    }

    fn open_root(&mut self, seq: u64, at: u64, resumed_from: Option<SpanId>) {
        let span_id = span_id(&self.run, &attempt_key(seq));
        let mut span = Span {
            trace_id: self.trace.trace_id,
            span_id,
            parent_span_id: self.trace.parent_span_id,
            remote_parent: self.trace.remote_parent,
            name: format!("invoke_agent {}", self.agent),
            kind: SpanKind::Internal,
            start_unix_nanos: at,
            end_unix_nanos: None,
            status: SpanStatus::UNSET,
            attributes: attrs::run_attributes(&self.agent, self.session.as_deref(), &self.run),
            links: Vec::new(),
            request_id: self.run.clone(),
            seqs: Vec::new(),
            sampled: self.trace.sampled,
        };
        if let Some(first) = resumed_from {
            span.links.push(SpanLink {
                trace_id: self.trace.trace_id,
                span_id: first,
                attributes: Map::from_iter([(
                    "keel.link.type".to_owned(),
                    Value::from("resumed_from"),
                )]),
            });
            span.attributes
                .insert("keel.run.attempt_seq".into(), Value::from(seq));
        }
        self.root = Some(span);
    }

    /// The span id of the current attempt (the parent of what happens in it).
    fn root_id(&self) -> SpanId {
        self.root
            .as_ref()
            .map_or(self.first_root, |root| root.span_id)
    }

    /// Opens a span under `parent` (the root when `None`), keyed `key`.
    /// Its id is derived from `key`, or from `id_key` when the key is reused (`chat`).
    #[allow(clippy::too_many_arguments)]
    fn open(&mut self, key: String, id_key: Option<String>, name: String, kind: SpanKind, at: u64, seq: u64, parent: Option<SpanId>) -> &mut Span {
        let mut id_key = id_key.unwrap_or_else(|| key.clone());
        if self.used.contains(&id_key) {
            id_key = format!("{id_key}#{seq}");
        }
        self.used.insert(id_key.clone());
        let span = Span {
            trace_id: self.trace.trace_id,
            span_id: span_id(&self.run, &id_key),
            parent_span_id: Some(parent.unwrap_or_else(|| self.root_id())),
            remote_parent: false,
            name,
            kind,
            start_unix_nanos: at,
            end_unix_nanos: None,
            status: SpanStatus::UNSET,
            attributes: Map::new(),
            links: Vec::new(),
            request_id: self.run.clone(),
            seqs: vec![seq],
            sampled: self.trace.sampled,
        };
        self.open.entry(key).or_insert(span)
    }

    /// Ends the span keyed `key` at `at`.
    fn close(&mut self, key: &str, at: u64) -> Option<&mut Span> {
        let mut span = self.open.remove(key)?;
        span.end_unix_nanos = Some(at.max(span.start_unix_nanos));
        self.finished.push(span);
        self.finished.last_mut()
    }

    /// A span that both starts and ends with what one event says (a hook, a compaction).
    fn whole(&mut self, name: String, start: u64, end: u64, seq: u64, parent: Option<SpanId>, attributes: Map<String, Value>, status: SpanStatus) {
        let span = Span {
            trace_id: self.trace.trace_id,
            span_id: span_id(&self.run, &seq_key("event", seq)),
            parent_span_id: Some(parent.unwrap_or_else(|| self.root_id())),
            remote_parent: false,
            name,
            kind: SpanKind::Internal,
            start_unix_nanos: start.min(end),
            end_unix_nanos: Some(end),
            status,
            attributes,
            links: Vec::new(),
            request_id: self.run.clone(),
            seqs: vec![seq],
            sampled: self.trace.sampled,
        };
        self.finished.push(span);
    }

    /// The open span of a tool call (opened by the first event naming it).
    fn call(&mut self, call_id: &str, tool: &str, at: u64, seq: u64) -> Option<&mut Span> {
        let key = call_key(call_id);
        if let Some(span) = self.open.get_mut(&key) {
            span.seqs.push(seq);
        } else {
            let span = self.open(key.clone(), None, format!("execute_tool {tool}"), SpanKind::Internal, at, seq, None);
            span.attributes = attrs::tool_attributes(tool, call_id);
        }
        self.open.get_mut(&key)
    }

    /// The span a call's hook or approval sits under: the call's, or the attempt's.
    fn parent_of_call(&self, call_id: Option<&str>) -> Option<SpanId> {
        call_id
            .and_then(|id| self.open.get(&call_key(id)))
            .map(|span| span.span_id)
    }

    fn map(&mut self, event: &Event, at: u64) {
        let seq = event.seq;
        match &event.payload {
            EventPayload::RequestStarted { input, .. } => {
                if self.capture_content
                    && let Some(root) = &mut self.root
                {
                    root.attributes.insert(
                        "gen_ai.input.messages".into(),
                        Value::from(attrs::user_message(input)),
                    );
                }
            }
            EventPayload::RequestForked { .. } => {
                // What precedes is a copy of another run's log: this run's own attempt
                // begins here.
                self.end_attempt(at, SpanStatus::UNSET);
                self.open_root(seq, at, None);
            }
            EventPayload::RequestResumed { .. } => {
                self.end_attempt(at, SpanStatus::error("the process running the run stopped"));
                self.open_root(seq, at, Some(self.first_root));
            }
            EventPayload::WorkflowStarted(started) => {
                if let Some(root) = &mut self.root {
                    root.name = format!("invoke_workflow {}", started.workflow);
                    root.attributes
                        .insert("gen_ai.operation.name".into(), Value::from("invoke_workflow"));
                    root.attributes
                        .insert("gen_ai.workflow.name".into(), Value::from(started.workflow.as_str()));
                }
            }
            EventPayload::DirectStarted { tool, arguments, .. } => {
                if let Some(root) = &mut self.root {
                    root.name = format!("execute_tool {tool}");
                    root.attributes = attrs::tool_attributes(tool, "");
                    root.attributes.remove("gen_ai.tool.call.id");
                    if self.capture_content {
                        root.attributes.insert(
                            "gen_ai.tool.call.arguments".into(),
                            Value::from(arguments.to_string()),
                        );
                    }
                }
            }
            EventPayload::DirectCompleted { ok, output, .. } => {
                if let Some(root) = &mut self.root {
                    if !ok {
                        root.status = SpanStatus::error(attrs::first_line(output));
                    }
                    if self.capture_content {
                        root.attributes
                            .insert("gen_ai.tool.call.result".into(), Value::from(output.as_str()));
                    }
                }
            }
            EventPayload::ModelStarted { step, attempt, model, provider, params } => {
                let span = self.open("chat".into(), Some(seq_key("chat", seq)), format!("chat {model}"), SpanKind::Client, at, seq, None);
                span.attributes = attrs::chat_attributes(*step, *attempt, model, provider, params);
            }
            EventPayload::ModelQueued { wait_ms, .. } => {
                if let Some(span) = self.open.get_mut("chat") {
                    span.attributes.insert("keel.model.queued_ms".into(), Value::from(*wait_ms));
                }
            }
            EventPayload::ModelCompleted { stop_reason, usage, content, tool_calls, .. } => {
                let capture = self.capture_content;
                if let Some(span) = self.close("chat", at) {
                    span.seqs.push(seq);
                    attrs::chat_completed(span, *stop_reason, usage);
                    if capture {
                        span.attributes.insert(
                            "gen_ai.output.messages".into(),
                            Value::from(attrs::assistant_message(content, tool_calls, *stop_reason)),
                        );
                    }
                }
            }
            EventPayload::ModelRetry { error, .. } => {
                if let Some(span) = self.close("chat", at) {
                    span.seqs.push(seq);
                    span.attributes.insert("error.type".into(), Value::from(code_name(error.code)));
                    span.status = SpanStatus::error(error.message.clone());
                }
            }
            EventPayload::ModelFallback { from, to, reason, .. } => {
                if let Some(span) = self.close("chat", at) {
                    span.seqs.push(seq);
                    span.attributes.insert("error.type".into(), Value::from(code_name(reason.code)));
                    span.status = SpanStatus::error(reason.message.clone());
                }
                if let Some(root) = &mut self.root {
                    root.attributes.insert("keel.model.fallback".into(), Value::from(format!("{from} -> {to}")));
                }
            }
            EventPayload::ContextCompacted { step, reason, tokens_before, tokens_after, elided, summarized, summarizer_usage, error, .. } => {
                let attributes = attrs::compaction(*step, reason, *tokens_before, *tokens_after, elided.len(), summarized.is_some(), summarizer_usage.as_ref());
                let status = error.as_ref().map_or(SpanStatus::UNSET, SpanStatus::error);
                self.whole("keel.context.compaction".into(), self.last_nanos, at, seq, None, attributes, status);
            }
            EventPayload::MemoryRecallCompleted { namespaces, record_ids, mode, omitted, chars, .. } => {
                let attributes = attrs::recall(namespaces, record_ids.len(), mode, *omitted, *chars);
                self.whole("keel.memory.recall".into(), self.last_nanos, at, seq, None, attributes, SpanStatus::UNSET);
            }
            EventPayload::ToolGuard { call_id, tool, decision, issues, repairs, resolved_tool, arguments, .. } => {
                let capture = self.capture_content;
                let Some(span) = self.call(call_id, resolved_tool.as_deref().unwrap_or(tool), at, seq) else {
                    return;
                };
                attrs::guard(span, decision.as_str(), issues.len(), repairs);
                if capture {
                    span.attributes.insert("gen_ai.tool.call.arguments".into(), Value::from(arguments.as_str()));
                }
                if decision.as_str() == "blocked" {
                    span.status = SpanStatus::error("the gateway blocked the call");
                    span.attributes.insert("error.type".into(), Value::from("blocked"));
                }
            }
            EventPayload::PolicyDecided { call_id, tool, decision, source, reason } => {
                let Some(span) = self.call(call_id, tool, at, seq) else {
                    return;
                };
                span.attributes.insert("keel.policy.decision".into(), Value::from(decision.as_str()));
                span.attributes.insert("keel.policy.rule".into(), Value::from(source.as_str()));
                if let Some(reason) = reason {
                    span.attributes.insert("keel.policy.reason".into(), Value::from(reason.as_str()));
                }
            }
            EventPayload::ToolSandbox { call_id, tool, sandbox } => {
                if let Some(span) = self.call(call_id, tool, at, seq) {
                    attrs::sandbox(span, sandbox);
                }
            }
            EventPayload::ApprovalRequested { approval } => {
                let parent = self.parent_of_call(approval.call_id.as_deref());
                let key = format!("approval:{}", approval.approval_id);
                let span = self.open(key, None, "keel.approval".into(), SpanKind::Internal, at, seq, parent);
                span.attributes = attrs::approval_requested(approval);
            }
            EventPayload::ApprovalResolved { approval_id, status, decided_by, reason } => {
                let key = format!("approval:{approval_id}");
                if let Some(span) = self.close(&key, at) {
                    span.seqs.push(seq);
                    attrs::approval_resolved(span, status.as_str(), decided_by.as_deref(), reason.as_deref());
                }
            }
            EventPayload::HookCompleted { hook, event: when, call_id, outcome, reason, duration_ms, .. } => {
                let parent = self.parent_of_call(call_id.as_deref());
                let attributes = attrs::hook(hook, when.as_str(), Some(outcome), reason.as_deref(), None, call_id.as_deref());
                let start = at.saturating_sub(duration_ms * 1_000_000);
                self.whole(format!("keel.hook {hook}"), start, at, seq, parent, attributes, SpanStatus::UNSET);
            }
            EventPayload::HookFailed { hook, event: when, call_id, error, on_error, duration_ms, .. } => {
                let parent = self.parent_of_call(call_id.as_deref());
                let attributes = attrs::hook(hook, when.as_str(), None, None, Some(on_error.as_str()), call_id.as_deref());
                let start = at.saturating_sub(duration_ms * 1_000_000);
                self.whole(format!("keel.hook {hook}"), start, at, seq, parent, attributes, SpanStatus::error(error.clone()));
            }
            EventPayload::Adapter { event: adapter } => self.adapter(adapter, at, seq),
            EventPayload::NodeStarted(node) => {
                let key = crate::kernel::node_call_key(&node.node, node.key, node.attempt);
                let span = self.open(call_key(&key), None, format!("keel.workflow.node {}", node.node), SpanKind::Internal, at, seq, None);
                span.attributes = attrs::node(&node.node, &node.kind, node.key, node.attempt, node.child_request_id.as_ref());
            }
            EventPayload::NodeCompleted(node) => {
                if let Some(key) = self.open_node(&node.node, node.key) {
                    if let Some(span) = self.close(&key, at) {
                        span.seqs.push(seq);
                        span.attributes.insert("keel.workflow.node.state".into(), Value::from("completed"));
                    }
                }
            }
            EventPayload::NodeFailed(node) => {
                if let Some(key) = self.open_node(&node.node, node.key)
                    && let Some(span) = self.close(&key, at)
                {
                    span.seqs.push(seq);
                    span.attributes.insert("keel.workflow.node.state".into(), Value::from("failed"));
                    span.attributes.insert("keel.workflow.node.will_retry".into(), Value::from(node.will_retry));
                    span.status = SpanStatus::error(node.error.clone());
                }
            }
            EventPayload::NodeSkipped(node) => {
                let mut attributes = attrs::node(&node.node, "", node.key, 0, None);
                attributes.remove("keel.workflow.node.kind");
                attributes.remove("keel.workflow.node.attempt");
                attributes.insert("keel.workflow.node.state".into(), Value::from("skipped"));
                attributes.insert("keel.workflow.node.skip_reason".into(), Value::from(node.reason.as_str()));
                self.whole(format!("keel.workflow.node {}", node.node), at, at, seq, None, attributes, SpanStatus::UNSET);
            }
            EventPayload::RequestCompleted { output, usage, steps, finish_reason, .. } => {
                let capture = self.capture_content;
                self.end_run(at, seq, usage, *steps, finish_reason.as_str(), SpanStatus::UNSET, capture.then_some(output.as_str()));
            }
            EventPayload::RequestFailed { error, usage, steps, finish_reason, .. } => {
                let mut status = SpanStatus::error(error.message.clone());
                if status.message.as_deref() == Some("") {
                    status.message = Some(code_name(error.code));
                }
                if let Some(root) = &mut self.root {
                    root.attributes.insert("error.type".into(), Value::from(code_name(error.code)));
                }
                self.end_run(at, seq, usage, *steps, finish_reason.as_str(), status, None);
            }
            EventPayload::RequestCancelled { reason, usage, steps, .. } => {
                if let Some(root) = &mut self.root {
                    root.attributes.insert("error.type".into(), Value::from("cancelled"));
                }
                self.end_run(at, seq, usage, *steps, "cancelled", SpanStatus::error(format!("cancelled: {reason}")), None);
            }
            EventPayload::RequestInterrupted { reason, usage, steps, .. } => {
                if let Some(root) = &mut self.root {
                    root.attributes.insert("error.type".into(), Value::from("interrupted"));
                }
                self.end_run(at, seq, usage, *steps, "interrupted", SpanStatus::error(format!("interrupted: {reason}")), None);
            }
            _ => {}
        }
    }

    fn adapter(&mut self, adapter: &AdapterEvent, at: u64, seq: u64) {
        match adapter {
            AdapterEvent::ToolStart { call_id, tool, .. } => {
                if let Some(span) = self.call(call_id, tool, at, seq) {
                    span.attributes.insert("keel.tool.started".into(), Value::from(true));
                }
            }
            AdapterEvent::ToolResult { call_id, tool, ok, output, error, .. } => {
                let capture = self.capture_content;
                let _ = self.call(call_id, tool, at, seq);
                if let Some(span) = self.close(&call_key(call_id), at) {
                    if !ok {
                        span.status = SpanStatus::error(attrs::first_line(error.as_deref().unwrap_or(output)));
                        span.attributes.entry("error.type").or_insert_with(|| Value::from("tool_error"));
                    }
                    if capture {
                        span.attributes.insert("gen_ai.tool.call.result".into(), Value::from(output.as_str()));
                    }
                }
            }
            AdapterEvent::Handoff { call_id, agent, child_request_id, .. } => {
                if let Some(span) = self.call(call_id, "task", at, seq) {
                    span.attributes.insert("keel.child.agent".into(), Value::from(agent.as_str()));
                    span.attributes.insert("keel.child.request_id".into(), Value::from(child_request_id.0.as_str()));
                }
            }
            AdapterEvent::ToolProgress { call_id, tool, .. } => {
                let _ = self.call(call_id, tool, at, seq);
            }
            _ => {}
        }
    }

    /// The key of the open span of a node's current attempt.
    fn open_node(&self, node: &str, key: keel_types::NodeKey) -> Option<String> {
        let prefix = call_key(&crate::kernel::node_call_key(node, key, 0));
        let stem = prefix.trim_end_matches("@0");
        self.open
            .keys()
            .filter(|k| k.strip_prefix(stem).is_some_and(|rest| rest.starts_with('@')))
            .max()
            .cloned()
    }

    /// Ends every open span of the attempt and the attempt itself.
    fn end_attempt(&mut self, at: u64, status: SpanStatus) {
        let at = if self.last_nanos > 0 { self.last_nanos.min(at) } else { at };
        let keys: Vec<String> = self.open.keys().cloned().collect();
        for key in keys {
            if let Some(span) = self.close(&key, at)
                && span.status.code != "error"
            {
                span.status = status.clone();
            }
        }
        if let Some(mut root) = self.root.take() {
            root.end_unix_nanos = Some(at.max(root.start_unix_nanos));
            root.status = status;
            self.finished.push(root);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn end_run(&mut self, at: u64, seq: u64, usage: &keel_types::Usage, steps: u32, finish: &str, status: SpanStatus, output: Option<&str>) {
        if let Some(root) = &mut self.root {
            root.seqs.push(seq);
            attrs::run_totals(root, usage, steps, finish);
            if let Some(output) = output {
                root.attributes.insert(
                    "gen_ai.output.messages".into(),
                    Value::from(attrs::assistant_message(output, &[], keel_types::ModelStopReason::Stop)),
                );
            }
        }
        let keys: Vec<String> = self.open.keys().cloned().collect();
        for key in keys {
            if let Some(span) = self.close(&key, at) {
                span.status = SpanStatus::error("the run ended before it did");
            }
        }
        if let Some(mut root) = self.root.take() {
            root.end_unix_nanos = Some(at.max(root.start_unix_nanos));
            root.status = status;
            self.finished.push(root);
        }
    }
}

/// An error code's wire name (`model_timeout`).
fn code_name(code: keel_types::ErrorCode) -> String {
    match serde_json::to_value(code) {
        Ok(Value::String(name)) => name,
        _ => format!("{code:?}"),
    }
}

/// An event's time (`2026-11-22T12:00:00.120Z`) as Unix nanoseconds.
pub fn unix_nanos(ts: &str) -> Option<u64> {
    let parsed = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(parsed.unix_timestamp_nanos()).ok()
}

#[cfg(test)]
mod tests;
