//! `GET /metrics`: the Prometheus scrape. Reads the counts that cover every process sharing
//! the store (runs by status, approvals pending) and this server's runs in flight, and answers
//! the metrics of [`crate::telemetry::Telemetry`] in the OpenMetrics text format.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use keel::ApprovalStatus;

use crate::ApiError;
use crate::body::internal;
use crate::state::AppState;
use crate::telemetry::StoreCounts;

/// `GET /metrics`: Prometheus text format.
pub(crate) async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let runs = state.runtime.runs().counts().await.map_err(internal)?;
    let pending = state
        .runtime
        .approvals()
        .list(Some(ApprovalStatus::Pending))
        .await
        .map_err(internal)?;
    let text = state
        .telemetry
        .render(StoreCounts {
            runs,
            approvals_pending: pending.len(),
            runs_in_flight: state.admission.in_flight(),
            cluster: state.runtime.cluster_status().await.map_err(internal)?,
            otel: otel_counts(&state.runtime),
        })
        .map_err(|e| ApiError::Internal(format!("encoding metrics: {e}")))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// The OTLP exporter's counts, when the runtime exports.
fn otel_counts(runtime: &keel::Runtime) -> Option<crate::telemetry::OtelCounts> {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = runtime.telemetry()?;
    Some(crate::telemetry::OtelCounts {
        exported: stats.spans_exported.load(Relaxed),
        dropped_queue_full: stats.spans_dropped_queue_full.load(Relaxed),
        dropped_export_failed: stats.spans_dropped_export_failed.load(Relaxed),
        exports_failed: stats.exports_failed.load(Relaxed),
    })
}
