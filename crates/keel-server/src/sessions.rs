//! Sessions under `/api/sessions`: list, inspect with the transcript, delete, compact.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ApiError;
use crate::body::{internal, parse_query, session_id};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /api/sessions?limit=` → `{data: [SessionRecord…]}`, most recently active first.
pub(crate) async fn list_sessions(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let query: ListQuery = parse_query(query.as_deref())?;
    let sessions = state
        .runtime
        .sessions()
        .list(query.limit)
        .await
        .map_err(internal)?;
    Ok(Json(json!({ "data": sessions })))
}

/// `GET /api/sessions/{id}` → `{session: SessionRecord, messages: [SessionMessage…]}`.
pub(crate) async fn get_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = session_id(&id, "id")?;
    let session = state
        .runtime
        .sessions()
        .get(&id)
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::ResourceNotFound(format!("no session `{id}`")))?;
    let messages = state
        .runtime
        .sessions()
        .transcript(&id)
        .await
        .map_err(internal)?;
    Ok(Json(json!({ "session": session, "messages": messages })))
}

/// `DELETE /api/sessions/{id}` → `{deleted: true}` (its runs stay); 404 if there is none.
pub(crate) async fn delete_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = session_id(&id, "id")?;
    if state
        .runtime
        .sessions()
        .delete(&id)
        .await
        .map_err(internal)?
    {
        Ok(Json(json!({ "deleted": true })))
    } else {
        Err(ApiError::ResourceNotFound(format!("no session `{id}`")))
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompactQuery {
    #[serde(default)]
    keep: Option<usize>,
}

/// `POST /api/sessions/{id}/compact?keep=` → `{summary}`: the session's turns before its last
/// `keep` (default 4) summarized; `summary` is null when there was nothing to compact.
pub(crate) async fn compact_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let id = session_id(&id, "id")?;
    let query: CompactQuery = parse_query(query.as_deref())?;
    let summary = state
        .runtime
        .sessions()
        .compact(&id, query.keep.unwrap_or(4))
        .await
        .map_err(crate::error::runtime_error)?;
    Ok(Json(json!({ "summary": summary })))
}
