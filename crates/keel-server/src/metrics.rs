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
