//! W3C trace context on the way in (`docs/observability.md`): a request's `traceparent` and
//! `tracestate` become the parent of the run it starts.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use keel_types::{RunTrace, TraceParent};

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
