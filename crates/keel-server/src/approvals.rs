//! Approvals under `/api/approvals`: list, approve, deny (each decided exactly once).

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use bytes::Bytes;
use keel::{ApprovalScope, ApprovalStatus};
use keel_types::StoreError;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{internal, parse_body, parse_opt_enum, parse_query};
use crate::state::AppState;

/// Who decided approvals made through the API.
const DECIDER: &str = "api";

#[derive(Debug, Deserialize)]
struct ApprovalsQuery {
    #[serde(default)]
    status: Option<String>,
}

/// `GET /api/approvals?status=pending` → `{data: [ApprovalRecord…]}`.
pub(crate) async fn list_approvals(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ApprovalsQuery = parse_query(query.as_deref())?;
    let status = parse_opt_enum::<ApprovalStatus>(query.status.as_deref(), "status")?;
    let approvals = state
        .runtime
        .approvals()
        .list(status)
        .await
        .map_err(internal)?;
    Ok(Json(json!({ "data": approvals })))
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Decision {
    #[serde(default)]
    reason: Option<String>,
    /// `once` (default): this call; `session`: calls of the same tool for the rest of the
    /// run's session.
    #[serde(default)]
    scope: ApprovalScope,
}

/// `POST /api/approvals/{id}/approve` (`{reason?, scope?}`).
pub(crate) async fn approve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<keel::ApprovalRecord>, ApiError> {
    decide(state, id, true, body).await
}

/// `POST /api/approvals/{id}/deny` (`{reason?}`).
pub(crate) async fn deny(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<keel::ApprovalRecord>, ApiError> {
    decide(state, id, false, body).await
}

/// Decides an approval once: the decided record, 404 for an unknown id, 409 when it was
/// already decided.
async fn decide(
    state: AppState,
    id: String,
    approve: bool,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<keel::ApprovalRecord>, ApiError> {
    let decision: Decision = parse_body(body, true)?;
    state
        .runtime
        .approvals()
        .decide(
            &id,
            approve,
            decision.scope,
            DECIDER,
            decision.reason.as_deref(),
        )
        .await
        .map(Json)
        .map_err(|error| match error {
            keel::RuntimeError::Store(StoreError::Invalid(message))
                if message.contains("was already") =>
            {
                ApiError::Conflict(message)
            }
            keel::RuntimeError::Store(StoreError::Invalid(message))
                if message.starts_with("no approval") =>
            {
                ApiError::ResourceNotFound(message)
            }
            other => internal(other),
        })
}
