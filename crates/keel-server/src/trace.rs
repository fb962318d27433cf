//! W3C trace context on the way in (`docs/observability.md`): a request's `traceparent` and
//! `tracestate` become the parent of the run it starts, and `GET /api/requests/{id}/trace`
//! shows a run's spans.

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use axum::Extension;
use keel_types::{RequestId, RunTrace, TraceParent};
use serde_json::{Value, json};

use crate::state::Principal;
use crate::error::ApiError;
use crate::state::AppState;

tokio::task_local! {
    /// The trace context of the HTTP request being handled.
    static INCOMING: Option<RunTrace>;
}

/// The trace a request's headers name, if they name a valid one. An invalid `traceparent` is
/// ignored, as W3C Trace Context asks (the run starts a trace of its own).
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<RunTrace> {
    let header = headers.get("traceparent")?.to_str().ok()?;
    match TraceParent::parse(header) {
        Ok(parent) => {
            let state = headers
                .get("tracestate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            Some(RunTrace::remote(parent, state))
        }
        Err(error) => {
            tracing::debug!(%error, "Ignoring an invalid traceparent.");
            None
        }
    }
}

/// Middleware: keeps the request's trace context for the handler ([`incoming`]).
pub(crate) async fn keep_incoming(request: Request, next: Next) -> Response {
    let trace = from_headers(request.headers());
    INCOMING.scope(trace, next.run(request)).await
}

/// The trace context of the request being handled, if it sent one.
pub(crate) fn incoming() -> Option<RunTrace> {
    INCOMING.try_with(Clone::clone).ok().flatten()
}

/// `GET /api/requests/{id}/trace` → `{requestId, traceId, spans}`: the spans of the run and of
/// every run it started, computed from their events.
pub(crate) async fn request_trace(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = RequestId::from(id);
    let run = crate::requests::visible_run(&state.runtime, &principal, &id).await?;
    let spans = state
        .runtime
        .trace(&id)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no request `{id}`")))?;
    let trace = keel::trace::trace_of(&run).trace_id.to_string();
    let spans: Vec<Value> = spans
        .iter()
        .map(|span| {
            let mut value = serde_json::to_value(span).unwrap_or(Value::Null);
            if let Some(object) = value.as_object_mut() {
                object.insert("durationMs".into(), json!(span.duration_ms()));
            }
            value
        })
        .collect();
    Ok(Json(json!({
        "requestId": id,
        "traceId": trace,
        "semconv": keel::trace::SEMCONV_VERSION,
        "spans": spans,
    })))
}
