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

mod attributes;
mod attrs;
mod builder;
mod mapping;

pub use attributes::Attributes;
pub use builder::TraceBuilder;

use keel_types::trace::{attempt_key, call_key, span_id};
use keel_types::{Event, RequestId, RunRecord, RunTrace, SpanId, TraceId};
use serde::Serialize;
use serde_json::Value;

/// The version of the OpenTelemetry semantic conventions the spans follow (the GenAI
/// conventions' latest experimental names, as `OTEL_SEMCONV_STABILITY_OPT_IN=
/// gen_ai_latest_experimental` selects in other instrumentations).
pub const SEMCONV_VERSION: &str = "1.41.0";

/// The schema URL of [`SEMCONV_VERSION`] (the spans' instrumentation scope names it).
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";

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
    pub attributes: Attributes,
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
    pub attributes: Attributes,
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

    /// The `tracing` span a run's work is done in: logs written meanwhile carry the run's id
    /// and trace (`KEEL_LOG_FORMAT=json`).
    pub fn tracing_span(&self) -> tracing::Span {
        tracing::info_span!(
            "keel.run",
            request_id = %self.run,
            trace_id = %self.trace.trace_id,
            span_id = %self.attempt,
        )
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

/// An error code's wire name (`model_timeout`).
fn code_name(code: keel_types::ErrorCode) -> String {
    match serde_json::to_value(code) {
        Ok(Value::String(name)) => name,
        _ => format!("{code:?}"),
    }
}

/// An event's time (`2026-11-22T12:00:00.120Z`) as Unix nanoseconds.
pub fn unix_nanos(ts: &str) -> Option<u64> {
    let parsed =
        time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(parsed.unix_timestamp_nanos()).ok()
}

#[cfg(test)]
mod tests;
