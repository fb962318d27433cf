//! Keel's spans as the OpenTelemetry SDK's `SpanData`, which the OTLP exporter encodes.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use keel_runtime::trace::{SCHEMA_URL, Span, SpanKind, SpanLink};
use opentelemetry::trace::{SpanContext, SpanId, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value as Json;

fn time(nanos: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos)
}

fn context(
    trace: keel_types::TraceId,
    span: keel_types::SpanId,
    state: &TraceState,
) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(trace.0),
        SpanId::from_bytes(span.0),
        TraceFlags::SAMPLED,
        false,
        state.clone(),
    )
}

/// The scope Keel's spans are reported under (made once; its parts are static, so a clone
/// per span copies no text).
pub(super) fn scope() -> InstrumentationScope {
    static SCOPE: std::sync::OnceLock<InstrumentationScope> = std::sync::OnceLock::new();
    SCOPE
        .get_or_init(|| {
            InstrumentationScope::builder("keel")
                .with_version(env!("CARGO_PKG_VERSION"))
                .with_schema_url(SCHEMA_URL)
                .build()
        })
        .clone()
}

/// A JSON attribute value as an OpenTelemetry value: strings, booleans and numbers as they
/// are, a list of one type as an array, anything else as its JSON text. Takes the value, so
/// its text moves instead of being copied.
pub(super) fn value(json: Json) -> Value {
    match json {
        Json::String(s) => Value::from(s),
        Json::Bool(b) => Value::Bool(b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::I64(i),
            None => Value::F64(n.as_f64().unwrap_or_default()),
        },
        Json::Array(items) if items.iter().all(Json::is_string) => Value::Array(Array::String(
            items
                .into_iter()
                .map(|i| match i {
                    Json::String(s) => StringValue::from(s),
                    other => StringValue::from(other.to_string()),
                })
                .collect(),
        )),
        Json::Array(items) if items.iter().all(|i| i.as_i64().is_some()) => {
            Value::Array(Array::I64(items.iter().filter_map(Json::as_i64).collect()))
        }
        other => Value::from(other.to_string()),
    }
}

/// The attributes as the SDK's: their names are static, so none is copied.
pub(super) fn attributes(attributes: keel_runtime::trace::Attributes) -> Vec<KeyValue> {
    attributes
        .into_iter()
        .map(|(key, json)| KeyValue::new(opentelemetry::Key::from_static_str(key), value(json)))
        .collect()
}

fn link(link: &SpanLink) -> opentelemetry::trace::Link {
    opentelemetry::trace::Link::new(
        context(link.trace_id, link.span_id, &TraceState::default()),
        attributes(link.attributes.clone()),
        0,
    )
}

/// `span` as the exporter takes it.
pub(super) fn span_data(span: Span) -> SpanData {
    let state = TraceState::default();
    let status = match span.status.code {
        "error" => Status::error(span.status.message.unwrap_or_default()),
        "ok" => Status::Ok,
        _ => Status::Unset,
    };
    let end = span.end_unix_nanos.unwrap_or(span.start_unix_nanos);
    // Non-exhaustive: made by default, then filled.
    let mut links = SpanLinks::default();
    links.links = span.links.iter().map(link).collect();
    SpanData {
        span_context: context(span.trace_id, span.span_id, &state),
        parent_span_id: span
            .parent_span_id
            .map_or(SpanId::INVALID, |id| SpanId::from_bytes(id.0)),
        parent_span_is_remote: span.remote_parent,
        span_kind: match span.kind {
            SpanKind::Client => opentelemetry::trace::SpanKind::Client,
            SpanKind::Internal => opentelemetry::trace::SpanKind::Internal,
        },
        name: Cow::Owned(span.name),
        start_time: time(span.start_unix_nanos),
        end_time: time(end),
        attributes: attributes(span.attributes),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links,
        status,
        instrumentation_scope: scope(),
    }
}
